import TetherCall
import TetherWire
import TetherSync
import XCTest

/// Two call machines through a whole call (signaling.md §7.3): offer, answer, trickled
/// candidates, `channel`, the KK handshake and key confirmation, chat both ways with receipts,
/// rotation under traffic, hang-up.
final class CallMachineConversationTests: XCTestCase {
    private let safetyNumber = "87123 91341 61965 52377 79898 65120 99612 99002 60117 21426 28131 82440"

    func testACallRunsFromOfferToHangUpWithChatReceiptsAndRotation() throws {
        let pair = CallMachinePair()
        let call = Fixture.callID
        pair.ring()
        XCTAssertEqual(pair.commands(.alice), [.createOffer])
        XCTAssertEqual(pair.signals(.alice).map(\.kind), [.offer, .candidate, .candidate])
        XCTAssertEqual(pair.notices(.bob), [.incoming(from: Fixture.alice, call: call)])
        XCTAssertEqual(pair.bob.call, CallSummary(call: call, peer: Fixture.alice, direction: .incoming, phase: .invited))
        XCTAssertEqual(pair.alice.call?.phase, .ringing)
        XCTAssertTrue(pair.commands(.bob).isEmpty, "no media, and so no candidate, before consent")

        pair.handle(.accept(call: call), on: .bob)
        XCTAssertEqual(pair.commands(.bob).first, .acceptOffer(sdp: "v=0\r\na=scripted-offer\r\n"))
        pair.pump()
        XCTAssertEqual(pair.signals(.bob).map(\.kind), [.answer, .candidate, .candidate, .channel])
        XCTAssertEqual(pair.signals(.alice).map(\.kind), [.offer, .candidate, .candidate, .channel])
        XCTAssertEqual(pair.notices(.alice), [.answered(call: call), .secured(call: call, safetyNumber: safetyNumber)])
        XCTAssertEqual(pair.notices(.bob).last, .secured(call: call, safetyNumber: safetyNumber))
        XCTAssertEqual(pair.alice.call?.phase, .secured)
        XCTAssertEqual(pair.bob.call?.phase, .secured)
        XCTAssertEqual(pair.alice.secureChannel?.sessionID, pair.bob.secureChannel?.sessionID)
        XCTAssertEqual(pair.alice.secureChannel?.role, .initiator)

        let hello = pair.send("hello Bob", from: .alice)
        let reply = pair.send("hi Alice", from: .bob)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["hello Bob"])
        XCTAssertEqual(pair.texts(.alice), ["hi Alice"])
        XCTAssertEqual(pair.receipts(.alice), [hello])
        XCTAssertEqual(pair.receipts(.bob), [reply])

        // Rotation while texts cross in both directions.
        pair.handle(.rotate(call: call), on: .alice)
        let during = [pair.send("during 1", from: .alice), pair.send("during 2", from: .bob), pair.send("during 3", from: .alice)]
        pair.pump()
        XCTAssertTrue(pair.notices(.alice).contains(.rotated(call: call, epoch: 1)))
        XCTAssertTrue(pair.notices(.bob).contains(.rotated(call: call, epoch: 1)))
        XCTAssertEqual(pair.texts(.bob), ["hello Bob", "during 1", "during 3"])
        XCTAssertEqual(pair.texts(.alice), ["hi Alice", "during 2"])
        XCTAssertEqual(Set(pair.receipts(.alice) + pair.receipts(.bob)), Set([hello, reply] + during))
        XCTAssertEqual(pair.alice.secureChannel?.epoch, 1)

        pair.handle(.hangUp(call: call), on: .bob)
        XCTAssertEqual(pair.signals(.bob).last?.kind, .close)
        XCTAssertEqual(pair.commands(.bob).last, .close)
        pair.pump()
        XCTAssertEqual(pair.ended(.bob), [.hungUp])
        XCTAssertEqual(pair.ended(.alice), [.peerHungUp])
        XCTAssertEqual(pair.commands(.alice).last, .close)
        XCTAssertNil(pair.alice.call)
        XCTAssertNil(pair.bob.call)
        XCTAssertNil(pair.alice.nextDeadline)
        XCTAssertEqual(pair.alice.droppedSignals, [:], "nothing on the way was refused")
        // Bob's media close reached Alice after she had ended: a stale report, ignored.
        XCTAssertEqual(pair.ended(.alice).count, 1)
    }

    func testFramesPacedByTheChannelLeaveAtTheMachinesNextDeadline() {
        let pair = CallMachinePair()
        pair.connect()
        let sent = (1...45).map { pair.send("burst \($0)", from: .alice) }
        pair.pump()
        XCTAssertLessThan(pair.texts(.bob).count, 45, "the 40-per-second pace holds some back")
        XCTAssertGreaterThan(pair.alice.secureChannel?.pacedFrameCount ?? 0, 0)
        XCTAssertEqual(pair.alice.nextDeadline, pair.alice.secureChannel?.nextTick)
        while pair.alice.secureChannel?.pacedFrameCount ?? 0 > 0 || pair.bob.secureChannel?.pacedFrameCount ?? 0 > 0 {
            pair.advanceToDeadline(of: pair.alice.secureChannel?.pacedFrameCount ?? 0 > 0 ? .alice : .bob)
        }
        XCTAssertEqual(pair.texts(.bob), (1...45).map { "burst \($0)" })
        XCTAssertEqual(Set(pair.receipts(.alice)), Set(sent))
        XCTAssertEqual(pair.alice.call?.phase, .secured)
    }

    /// signaling.md §9.5, §14: Tether keeps no message history: each text is handed to the app as
    /// it arrives and only its id is remembered (the 512-id dedup window), inside the call's
    /// channel. So past 200 texts nothing accumulates, and a hang-up leaves no call, no channel
    /// and no text; the next call starts with nothing of the last one.
    func testNoMessageHistoryOutlivesTheCallAndNoneExceeds200() throws {
        let pair = CallMachinePair()
        pair.connect()
        let sent = pair.type((1...201).map { "text \($0)" }, from: .alice)
        XCTAssertEqual(pair.texts(.bob), (1...201).map { "text \($0)" }, "every text handed over as it arrived, none held back")
        XCTAssertEqual(Set(pair.receipts(.alice)), Set(sent))

        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        pair.pump()
        for side in [CallMachinePair.Side.alice, .bob] {
            XCTAssertNil(pair.machine(side).call, "\(side): the call is gone")
            XCTAssertNil(pair.machine(side).secureChannel, "\(side): the channel, and the ids it remembered, are gone")
        }

        pair.clearRecords()
        let next = try XCTUnwrap(CallUUID("0c6b9f4e-5a3d-4e21-8f70-1b2c3d4e5f60"))
        pair.connect(next)
        XCTAssertEqual(pair.bob.call?.phase, .secured)
        XCTAssertEqual(pair.texts(.bob), [], "nothing of the last call is delivered again")
        let again = pair.send("text 1", from: .alice, call: next, id: sent[0])
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["text 1"], "the last call's ids are forgotten: the same id is a new text")
        XCTAssertEqual(pair.receipts(.alice), [again])
    }

    func testEverySignalIsSignedByItsSenderForThePeerAndTheCall() throws {
        let pair = CallMachinePair()
        pair.connect()
        for (side, peer) in [(CallMachinePair.Side.alice, Fixture.bob), (.bob, Fixture.alice)] {
            for signal in pair.signals(side) {
                XCTAssertTrue(IdentityVerification.isAuthentic(signal))
                XCTAssertEqual(signal.to, peer)
                XCTAssertEqual(signal.call, Fixture.callID)
                XCTAssertNotNil(CallSignalBody.parse(signal))
            }
        }
        let answer = try XCTUnwrap(pair.signals(.bob).first.flatMap(CallSignalBody.parse))
        XCTAssertEqual(answer, .answer(.init(sdp: "v=0\r\na=scripted-answer\r\n", agreementKey: pair.bob.identity.agreementPublicKey,
                                             identitySignature: pair.bob.identity.identitySignature)))
        XCTAssertEqual(pair.signals(.bob).last?.body, "e30=")
        XCTAssertEqual(pair.signals(.bob).dropFirst().first.flatMap(CallSignalBody.parse),
                       .candidate(CallCandidate(candidate: "candidate:1 1 udp 2122252543 192.0.2.2 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)))
    }

    func testTheCallerStartsTheHandshakeOnlyOnceItsChannelIsOpenAndTheCalleesChannelArrived() {
        let pair = CallMachinePair()
        // Bob's `channel` is held back until Alice's data channel is open.
        var heldChannel: SignalMessage?
        pair.intercept = { signal in
            if signal.kind == .channel, signal.from == Fixture.bob, heldChannel == nil {
                heldChannel = signal
                return nil
            }
            return signal
        }
        pair.connect()
        XCTAssertEqual(pair.alice.call?.phase, .securing)
        XCTAssertFalse(pair.commands(.alice).contains { if case .send = $0 { true } else { false } }, "no frame before Bob's channel")
        XCTAssertEqual(pair.bob.call?.phase, .securing)
        pair.enqueue(.signal(heldChannel!), to: .alice)
        pair.pump()
        XCTAssertEqual(pair.alice.call?.phase, .secured)
        XCTAssertEqual(pair.bob.call?.phase, .secured)
    }

    func testALocalCandidateBeforeTheDescriptionWaitsForTheOfferToLeave() {
        let pair = CallMachinePair()
        let call = Fixture.callID
        pair.handle(.dial(peer: Fixture.bob, call: call), on: .alice)
        let early = CallCandidate(candidate: "candidate:9 1 udp 1 192.0.2.9 9 typ host", sdpMid: "0", sdpMLineIndex: 0)
        pair.handle(.media(call: call, .localCandidate(early)), on: .alice)
        pair.handle(.media(call: call, .localCandidate(CallCandidate(candidate: "x", sdpMid: nil, sdpMLineIndex: nil))), on: .alice)
        XCTAssertTrue(pair.signals(.alice).isEmpty)
        pair.pump()
        XCTAssertEqual(pair.signals(.alice).map(\.kind), [.offer, .candidate, .candidate, .candidate])
        XCTAssertEqual(CallSignalBody.parse(pair.signals(.alice)[1]), .candidate(early), "the held one first, the malformed one never")
    }
}
