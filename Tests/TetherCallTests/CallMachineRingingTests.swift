import TetherCall
import TetherWire
import TetherSync
import XCTest

/// One call at a time (§7.2), glare (§13.1), declining and rejecting (§7.3 step 2), cancelling.
final class CallMachineRingingTests: XCTestCase {
    private let carolCall = CallUUID("c0c0c0c0-0000-4000-8000-000000000001")!
    private let bobCall = CallUUID("b0b0b0b0-0000-4000-8000-000000000002")!

    func testAThirdCallersOfferDuringACallIsAnsweredBusyAndTheCallGoesOn() throws {
        let pair = CallMachinePair()
        pair.connect()
        pair.clearRecords()
        let carol = CallMachinePair.carol
        let out = pair.handle(.signal(carol.signal(.offer(carol.description()), to: Fixture.bob, call: carolCall)), on: .bob)
        XCTAssertEqual(out.count, 1)
        let busy = try XCTUnwrap(pair.signalsToOthers.last)
        XCTAssertEqual(busy.to, carol.id)
        XCTAssertEqual(busy.call, carolCall)
        XCTAssertEqual(CallSignalBody.parse(busy), .reject(.busy))
        XCTAssertTrue(IdentityVerification.isAuthentic(busy))
        XCTAssertEqual(pair.bob.call?.phase, .secured)
        XCTAssertTrue(pair.chatFlows(from: .alice))
    }

    func testAnOfferWhileRingingSomeoneElseIsAnsweredBusy() {
        let pair = CallMachinePair()
        pair.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice)
        let carol = CallMachinePair.carol
        pair.handle(.signal(carol.signal(.offer(carol.description()), to: Fixture.alice, call: carolCall)), on: .alice)
        XCTAssertEqual(pair.signalsToOthers.map { CallSignalBody.parse($0) }, [.reject(.busy)])
        XCTAssertEqual(pair.alice.call?.call, Fixture.callID)
        XCTAssertFalse(pair.notices(.alice).contains { if case .incoming = $0 { true } else { false } })
    }

    func testAnInvitationAlsoMakesTheCalleeBusyForOthers() {
        let pair = CallMachinePair()
        pair.ring()
        let carol = CallMachinePair.carol
        pair.handle(.signal(carol.signal(.offer(carol.description()), to: Fixture.bob, call: carolCall)), on: .bob)
        XCTAssertEqual(pair.signalsToOthers.map { CallSignalBody.parse($0) }, [.reject(.busy)])
        XCTAssertEqual(pair.bob.call?.call, Fixture.callID)
    }

    /// Both dial at once; `aliceFirst` decides whose offer leaves first. Alice's ID is the
    /// greater (BC7C… > 4721…), so she gives her call up and Bob keeps his.
    private func glare(aliceFirst: Bool) -> CallMachinePair {
        let pair = CallMachinePair()
        let dials: [(CallMachinePair.Side, SignalingID, CallUUID)] = [(.alice, Fixture.bob, Fixture.callID), (.bob, Fixture.alice, bobCall)]
        for (side, peer, call) in aliceFirst ? dials : dials.reversed() { pair.handle(.dial(peer: peer, call: call), on: side) }
        pair.pump()
        return pair
    }

    func testGlareTheGreaterIDAbandonsItsCallAndTheSmallerAnswersBusyInBothOrders() throws {
        for aliceFirst in [true, false] {
            let pair = glare(aliceFirst: aliceFirst)
            XCTAssertEqual(pair.ended(.alice), [.crossedCall], "aliceFirst \(aliceFirst)")
            XCTAssertTrue(pair.notices(.alice).contains(.incoming(from: Fixture.bob, call: bobCall)))
            XCTAssertEqual(pair.alice.call, CallSummary(call: bobCall, peer: Fixture.bob, direction: .incoming, phase: .invited))
            let abandoned = try XCTUnwrap(pair.signals(.alice).first { $0.kind == .close })
            XCTAssertEqual(abandoned.call, Fixture.callID)
            XCTAssertEqual(CallSignalBody.parse(abandoned), .close(.hangup))
            XCTAssertTrue(pair.commands(.alice).contains(.close), "Alice's own media is closed")
            let busy = try XCTUnwrap(pair.signals(.bob).first { $0.kind == .reject })
            XCTAssertEqual(busy.call, Fixture.callID)
            XCTAssertEqual(CallSignalBody.parse(busy), .reject(.busy))
            XCTAssertEqual(pair.bob.call, CallSummary(call: bobCall, peer: Fixture.alice, direction: .outgoing, phase: .ringing))
            XCTAssertTrue(pair.ended(.bob).isEmpty)
            XCTAssertFalse(pair.notices(.bob).contains { if case .incoming = $0 { true } else { false } })
            // Bob's busy reached Alice after her call had ended; her two candidates and her close
            // name a call Bob never had.
            XCTAssertEqual(pair.alice.droppedSignals[.staleCall], 1)
            XCTAssertEqual(pair.bob.droppedSignals[.notCurrentCall], 3)

            pair.handle(.accept(call: bobCall), on: .alice)
            pair.pump()
            XCTAssertEqual(pair.alice.call?.phase, .secured)
            XCTAssertEqual(pair.bob.call?.phase, .secured)
            XCTAssertEqual(pair.bob.secureChannel?.role, .initiator, "Bob dialed the call that survived: he is the initiator")
        }
    }

    func testTheCallerNeverTakesAnOfferForItsOwnCall() {
        let pair = CallMachinePair()
        pair.ring()
        let bob = pair.bob.identity
        let out = pair.handle(.signal(bob.signal(.offer(bob.description()), to: Fixture.alice)), on: .alice)
        XCTAssertEqual(out, [])
        XCTAssertEqual(pair.alice.lastDroppedSignal, .unexpected)
        XCTAssertEqual(pair.alice.call?.phase, .ringing)
    }

    func testARepeatedOfferIsDroppedAndNotAnsweredBusy() {
        let pair = CallMachinePair()
        pair.ring()
        let offer = pair.signals(.alice)[0]
        XCTAssertEqual(pair.handle(.signal(offer), on: .bob), [])
        XCTAssertEqual(pair.bob.lastDroppedSignal, .unexpected)
        XCTAssertEqual(pair.notices(.bob).count, 1, "one invitation")
    }

    func testADeclinedInvitationEndsBothSidesWithoutMediaOnTheCallee() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.decline(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.signals(.bob).map { CallSignalBody.parse($0) }, [.reject(.declined)])
        XCTAssertEqual(pair.ended(.bob), [.declined])
        XCTAssertTrue(pair.commands(.bob).isEmpty, "the callee never made media")
        XCTAssertEqual(pair.ended(.alice), [.peerDeclined])
        XCTAssertEqual(pair.commands(.alice).last, .close)
    }

    func testHangingUpAnInvitationDeclinesIt() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.hangUp(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.ended(.bob), [.declined])
        XCTAssertEqual(pair.ended(.alice), [.peerDeclined])
    }

    func testBusyAndErrorRejectsEndTheCallersCallWithTheirReason() {
        for (reason, ended) in [(CallSignalBody.RejectReason.busy, CallEndReason.peerBusy), (.error, .peerUnavailable), (.declined, .peerDeclined)] {
            let pair = CallMachinePair()
            pair.ring()
            pair.handle(.signal(pair.bob.identity.signal(.reject(reason), to: Fixture.alice)), on: .alice)
            XCTAssertEqual(pair.ended(.alice), [ended])
            XCTAssertEqual(pair.commands(.alice).last, .close)
            XCTAssertNil(pair.alice.call)
        }
    }

    func testTheCallerCancellingWhileItRingsEndsTheInvitation() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
        XCTAssertEqual(pair.signals(.alice).last.flatMap { CallSignalBody.parse($0) }, .close(.hangup))
        XCTAssertEqual(pair.ended(.bob), [.peerHungUp])
        XCTAssertNil(pair.bob.call)
    }

    func testCancellingBeforeTheOfferLeftTellsNobody() {
        let pair = CallMachinePair()
        pair.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice)
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
        XCTAssertTrue(pair.signals(.alice).isEmpty, "the offer never left, and the late description is stale")
        XCTAssertEqual(pair.commands(.alice), [.createOffer, .close])
        XCTAssertNil(pair.bob.call)
    }

    func testAnswersAndRequestsForAnotherCallDoNothing() {
        let pair = CallMachinePair()
        pair.ring()
        let other = CallUUID("00000000-0000-4000-8000-000000000000")!
        for event in [CallEvent.accept(call: other), .decline(call: other), .hangUp(call: other), .rotate(call: other)] {
            XCTAssertEqual(pair.handle(event, on: .bob), [])
        }
        XCTAssertEqual(pair.bob.call?.phase, .invited)
    }
}
