import TetherCall
import TetherWire
import TetherSync
import XCTest

/// Failures that end a call, what is ignored after the end, the signaling connection and the
/// TURN credential margin (§7.2, §7.3 step 7, §7.5, §9.6).
final class CallMachineEndingTests: XCTestCase {
    func testATamperedFrameFailsTheChannelClosedAndSendsCloseError() {
        let pair = CallMachinePair()
        pair.connect()
        pair.tamperNextFrame = .alice
        pair.send("flipped", from: .alice)
        pair.pump()
        XCTAssertEqual(pair.ended(.bob), [.channelFailed(.authenticationFailure)])
        XCTAssertEqual(pair.signals(.bob).last.flatMap { CallSignalBody.parse($0) }, .close(.error))
        XCTAssertEqual(pair.commands(.bob).last, .close)
        XCTAssertTrue(pair.texts(.bob).isEmpty)
        XCTAssertEqual(pair.ended(.alice), [.peerFailed])
        XCTAssertNil(pair.bob.secureChannel, "the channel and its keys are gone with the call")
    }

    func testAMediaFailureEndsTheCallWithCloseError() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.media(call: Fixture.callID, .failed), on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.mediaFailed])
        XCTAssertEqual(pair.signals(.alice).last.flatMap { CallSignalBody.parse($0) }, .close(.error))
        XCTAssertEqual(pair.commands(.alice).last, .close)
        pair.pump()
        XCTAssertEqual(pair.ended(.bob), [.peerFailed])
    }

    func testAClosedDataChannelWaitsBrieflyForThePeersCloseToNameTheReason() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.media(call: Fixture.callID, .channelClosed), on: .alice)
        XCTAssertTrue(pair.ended(.alice).isEmpty)
        XCTAssertNil(pair.alice.secureChannel, "nothing flows any more: the keys go at once")
        XCTAssertEqual(pair.alice.nextDeadline, pair.now + CallSetupLimits.closeSignalGrace)
        let id = MessageID.random()
        XCTAssertEqual(pair.handle(.sendText(call: Fixture.callID, text: "gone?", id: id, sentAt: 1), on: .alice),
                       [.notify(.sendRefused(call: Fixture.callID, id: id, .closed))])
        pair.advance(by: CallSetupLimits.closeSignalGrace - .nanoseconds(1))
        pair.handle(.hangUp(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.peerHungUp])
        XCTAssertFalse(pair.signals(.alice).contains { $0.kind == .close })
    }

    func testAClosedDataChannelWithoutAPeersCloseEndsTheCallWithCloseError() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.media(call: Fixture.callID, .channelClosed), on: .alice)
        pair.handle(.media(call: Fixture.callID, .channelClosed), on: .alice)
        pair.handle(.media(call: Fixture.callID, .channelMessage([0x02])), on: .alice)
        XCTAssertTrue(pair.ended(.alice).isEmpty, "a repeated report changes nothing")
        pair.advance(by: CallSetupLimits.closeSignalGrace)
        XCTAssertEqual(pair.ended(.alice), [.mediaClosed])
        XCTAssertEqual(pair.signals(.alice).last.flatMap { CallSignalBody.parse($0) }, .close(.error))
        XCTAssertEqual(pair.commands(.alice).last, .close)
        XCTAssertEqual(pair.ended(.bob), [.peerFailed])
    }

    func testLosingSignalingDuringTheGraceEndsTheCallAtOnce() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.media(call: Fixture.callID, .channelClosed), on: .alice)
        pair.handle(.signalingLost, on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.mediaClosed])
        XCTAssertFalse(pair.signals(.alice).contains { $0.kind == .close }, "no signaling to send it on")
    }

    func testASignalArrivingWhileUnregisteredIsDropped() {
        let pair = CallMachinePair()
        pair.handle(.signalingLost, on: .bob)
        pair.ring()
        XCTAssertNil(pair.bob.call)
        XCTAssertEqual(pair.bob.droppedSignals[.notRegistered], 3, "the offer and two candidates of a connection that is gone")
    }

    func testEventsForAnEndedCallAreIgnoredAndItsOfferCannotRingAgain() throws {
        let pair = CallMachinePair()
        pair.connect()
        let offer = try XCTUnwrap(pair.signals(.alice).first)
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        pair.pump()
        pair.clearRecords()
        let call = Fixture.callID
        for event in [CallMediaEvent.channelOpen, .channelMessage([0x02, 0x00]), .channelClosed, .failed, .localDescription(sdp: "v=0\r\n"),
                      .localCandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))] {
            XCTAssertEqual(pair.handle(.media(call: call, event), on: .bob), [])
        }
        for event in [CallEvent.accept(call: call), .hangUp(call: call), .decline(call: call), .rotate(call: call), .tick] {
            XCTAssertEqual(pair.handle(event, on: .bob), [])
        }
        let id = MessageID.random()
        XCTAssertEqual(pair.handle(.sendText(call: call, text: "late", id: id, sentAt: 1), on: .bob),
                       [.notify(.sendRefused(call: call, id: id, .closed))])
        let stale = pair.bob.droppedSignals[.staleCall, default: 0]
        XCTAssertEqual(pair.handle(.signal(pair.alice.identity.signal(.close(.error), to: Fixture.bob)), on: .bob), [])
        XCTAssertEqual(pair.handle(.signal(offer), on: .bob), [], "a replayed offer of the ended call")
        XCTAssertEqual(pair.bob.droppedSignals[.staleCall], stale + 2)
        XCTAssertNil(pair.bob.call)
        XCTAssertEqual(pair.handle(.dial(peer: Fixture.alice, call: call), on: .bob), [.notify(.dialRefused(call: call, .callIDReused))])
    }

    func testATextTypedBeforeKeyConfirmationWaitsForItAndOneBreakingALimitIsRefusedAtOnce() {
        let pair = CallMachinePair()
        pair.ring()
        let id = MessageID.random()
        XCTAssertEqual(pair.handle(.sendText(call: Fixture.callID, text: "before secured", id: id, sentAt: 1), on: .bob), [],
                       "queued, not refused: nothing may leave before key confirmation, so it waits")
        XCTAssertEqual(pair.bob.sendCapacity(for: Fixture.callID), CallSetupLimits.outgoingTexts - 1)
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.bob.call?.phase, .secured)
        XCTAssertEqual(pair.texts(.alice), ["before secured"], "delivered once secured")
        XCTAssertEqual(pair.receipts(.bob), [id])
        let empty = MessageID.random()
        XCTAssertEqual(pair.handle(.sendText(call: Fixture.callID, text: "", id: empty, sentAt: 1), on: .bob),
                       [.notify(.sendRefused(call: Fixture.callID, id: empty, .invalidPayload(.textLength)))])
    }

    func testADialIsRefusedWithItsReason() {
        let pair = CallMachinePair()
        let call = CallUUID("11111111-1111-4111-8111-111111111111")!
        func dial(_ peer: SignalingID, on side: CallMachinePair.Side = .alice) -> [CallAction] {
            pair.handle(.dial(peer: peer, call: call), on: side)
        }
        XCTAssertEqual(dial(Fixture.alice), [.notify(.dialRefused(call: call, .ownID))])
        pair.ring()
        XCTAssertEqual(dial(CallMachinePair.carol.id), [.notify(.dialRefused(call: call, .callInProgress))])
        XCTAssertEqual(dial(CallMachinePair.carol.id, on: .bob), [.notify(.dialRefused(call: call, .callInProgress))], "an invitation counts")
        XCTAssertEqual(pair.alice.call?.call, Fixture.callID)
        let offline = CallMachinePair()
        offline.handle(.signalingLost, on: .alice)
        XCTAssertEqual(offline.handle(.dial(peer: Fixture.bob, call: call), on: .alice), [.notify(.dialRefused(call: call, .signalingUnavailable))])
    }

    func testACallIsNotStartedWhenTheCredentialsExpireWithin30s() {
        let short = CallMachinePair(iceLifetime: 29)
        XCTAssertEqual(short.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice),
                       [.notify(.dialRefused(call: Fixture.callID, .credentialsExpiring))])
        XCTAssertNil(short.alice.call)
        let enough = CallMachinePair(iceLifetime: 30)
        XCTAssertEqual(enough.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice), [.media(call: Fixture.callID, .createOffer)])
        // New credentials from a new registration make calls possible again.
        short.handle(.registered(iceExpiresAt: short.unixSeconds + 3_600), on: .alice)
        XCTAssertEqual(short.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice), [.media(call: Fixture.callID, .createOffer)])
    }

    func testAcceptingWhenTheCredentialsExpireWithin30sRejectsWithError() {
        let pair = CallMachinePair(iceLifetime: 60)
        pair.ring()
        pair.unixSeconds += 31
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        XCTAssertEqual(pair.ended(.bob), [.credentialsExpiring])
        XCTAssertEqual(pair.signals(.bob).map { CallSignalBody.parse($0) }, [.reject(.error)])
        XCTAssertTrue(pair.commands(.bob).isEmpty, "no media was made")
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.peerUnavailable])
    }

    func testLosingSignalingEndsACallInSetupAndNothingIsSent() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.signalingLost, on: .alice)
        pair.handle(.signalingLost, on: .bob)
        XCTAssertEqual(pair.ended(.alice), [.signalingLost])
        XCTAssertEqual(pair.ended(.bob), [.signalingLost])
        XCTAssertEqual(pair.commands(.alice).last, .close)
        XCTAssertEqual(pair.signals(.alice).map(\.kind), [.offer, .candidate, .candidate])
        XCTAssertTrue(pair.signals(.bob).isEmpty)
        XCTAssertFalse(pair.alice.isRegistered)
    }

    func testASecuredCallOutlivesTheSignalingConnection() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.signalingLost, on: .alice)
        pair.handle(.signalingLost, on: .bob)
        XCTAssertEqual(pair.alice.call?.phase, .secured)
        XCTAssertTrue(pair.chatFlows(from: .alice), "over the data channel")
        let signalsBefore = pair.signals(.alice).count
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        XCTAssertEqual(pair.signals(.alice).count, signalsBefore, "no signaling to send close on")
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
        XCTAssertEqual(pair.ended(.bob), [.mediaClosed], "Bob learns it from the data channel")
    }

    func testTheCalleeNeedsSignalingUntilItSentChannelAndTheCallerUntilItHeardIt() {
        // Bob's `channel` is lost with his connection: Alice would never start.
        let pair = CallMachinePair()
        pair.loseCalleesChannel()
        pair.connect()
        XCTAssertEqual(pair.alice.call?.phase, .securing)
        pair.handle(.signalingLost, on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.signalingLost])
        // Bob sent his: he can go on without signaling.
        pair.handle(.signalingLost, on: .bob)
        XCTAssertEqual(pair.bob.call?.phase, .securing)
    }

    func testAfterRegisteringAgainAConnectedCallSignalsItsEnd() {
        let pair = CallMachinePair()
        pair.connect()
        pair.handle(.signalingLost, on: .alice)
        pair.handle(.registered(iceExpiresAt: pair.unixSeconds + 3_600), on: .alice)
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        pair.pump()
        XCTAssertEqual(pair.ended(.bob), [.peerHungUp])
    }

    func testAnOfferTheServerCallsOfflineEndsTheCallAtOnceWithoutAClose() {
        let pair = CallMachinePair()
        pair.intercept = { _ in nil }  // the server dropped it: Bob is not connected
        pair.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice)
        pair.pump()
        let before = pair.signals(.alice).count
        pair.handle(.signalRefused(call: Fixture.callID, kind: .offer, code: "offline"), on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.peerOffline])
        XCTAssertEqual(pair.signals(.alice).count, before, "no close to an ID that is not online")
        XCTAssertEqual(pair.commands(.alice).last, .close)
    }

    func testOtherRefusalsAndRefusalsPastSignalingLeaveTheCallToItsDeadlines() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.signalRefused(call: Fixture.callID, kind: .candidate, code: "rate_limited"), on: .alice)
        pair.handle(.signalRefused(call: CallUUID.random(), kind: .offer, code: "offline"), on: .alice)
        XCTAssertTrue(pair.ended(.alice).isEmpty)
        XCTAssertEqual(pair.alice.call?.phase, .ringing)
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.alice.call?.phase, .secured)
        pair.handle(.signalRefused(call: Fixture.callID, kind: .candidate, code: "offline"), on: .alice)
        XCTAssertEqual(pair.alice.call?.phase, .secured, "the data channel carries the call now")
    }

    func testADialToAnIDThatIsNoCurvePointIsRefused() {
        let pair = CallMachinePair()
        // y = 2 has no x on edwards25519 (RFC 8032 §5.1.3 decoding fails).
        let notAPoint = SignalingID(key: [0x02] + [UInt8](repeating: 0, count: 31))
        XCTAssertEqual(pair.handle(.dial(peer: notAPoint, call: Fixture.callID), on: .alice),
                       [.notify(.dialRefused(call: Fixture.callID, .invalidPeerID))])
    }
}
