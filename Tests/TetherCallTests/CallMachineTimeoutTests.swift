import TetherCall
import TetherWire
import TetherSync
import XCTest

/// The deadlines and bounded queues of §7.5.
final class CallMachineTimeoutTests: XCTestCase {
    private let second = Fixture.seconds(1)

    /// Alice's deadline is `limit` away: nothing happens a nanosecond before it, and at it both
    /// sides end with `timeout` and Alice sends `close` `timeout`.
    private func assertBothTimeOut(_ pair: CallMachinePair, after limit: Duration, as timeout: CallEndReason.Timeout, line: UInt = #line) {
        XCTAssertEqual(pair.alice.nextDeadline, pair.now + limit, line: line)
        pair.advance(by: limit - .nanoseconds(1))
        XCTAssertTrue(pair.ended(.alice).isEmpty, line: line)
        pair.advance(by: .nanoseconds(1))
        XCTAssertEqual(pair.ended(.alice), [.timeout(timeout)], line: line)
        XCTAssertEqual(pair.ended(.bob), [.timeout(timeout)], line: line)
        XCTAssertEqual(pair.signals(.alice).last.flatMap { CallSignalBody.parse($0) }, .close(.timeout), line: line)
    }

    func testRingingFor45sWithoutAnAnswerSendsCloseTimeout() {
        let pair = CallMachinePair()
        pair.ring(latency: second)
        XCTAssertEqual(pair.alice.nextDeadline, Fixture.start + Fixture.seconds(45))
        pair.advance(by: Fixture.seconds(44) - .nanoseconds(1))
        XCTAssertEqual(pair.alice.call?.phase, .ringing)
        pair.advance(by: .nanoseconds(1))
        XCTAssertEqual(pair.ended(.alice), [.timeout(.ringing)])
        XCTAssertEqual(pair.signals(.alice).last.flatMap { CallSignalBody.parse($0) }, .close(.timeout))
        XCTAssertEqual(pair.commands(.alice).last, .close)
        XCTAssertEqual(pair.ended(.bob), [.peerTimedOut])
    }

    func testASignalAfterTheDeadlineFindsTheCallAlreadyEnded() {
        let pair = CallMachinePair()
        pair.ring(latency: second)
        pair.now = Fixture.start + Fixture.seconds(45)
        // No tick came; the answer arriving now is too late all the same.
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.timeout(.ringing)])
        XCTAssertEqual(pair.alice.droppedSignals[.staleCall], 3, "Bob's answer and his two candidates")
        XCTAssertEqual(pair.ended(.bob), [.peerTimedOut])
    }

    func testAnUnansweredInvitationEndsOnItsOwnWhenTheCallersCloseIsLost() {
        let pair = CallMachinePair()
        pair.intercept = { $0.kind == .close ? nil : $0 }
        pair.ring(latency: second)
        pair.advance(by: Fixture.seconds(44))
        XCTAssertEqual(pair.ended(.alice), [.timeout(.ringing)])
        XCTAssertEqual(pair.bob.call?.phase, .invited, "the offer reached Bob a second after the dial")
        XCTAssertEqual(pair.bob.nextDeadline, Fixture.start + Fixture.seconds(46))
        pair.advance(by: second)
        XCTAssertEqual(pair.ended(.bob), [.timeout(.invitation)])
        XCTAssertTrue(pair.signals(.bob).isEmpty, "the caller gave up already: nothing to tell it")
    }

    func testICEAndTheDataChannelGet30sFromTheAnswerOnBothSides() {
        let pair = CallMachinePair()
        pair.connectivity = false
        pair.connect()
        XCTAssertEqual(pair.alice.call?.phase, .connecting)
        assertBothTimeOut(pair, after: Fixture.seconds(30), as: .connecting)
        XCTAssertEqual(pair.signals(.bob).last.flatMap { CallSignalBody.parse($0) }, .close(.timeout))
    }

    func testTheCalleesConnectingDeadlineRunsFromItsConsent() {
        let pair = CallMachinePair()
        pair.intercept = { $0.kind == .answer ? nil : $0 }
        pair.ring()
        pair.advance(by: Fixture.seconds(5))
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.bob.nextDeadline, Fixture.start + Fixture.seconds(35))
        pair.advance(by: Fixture.seconds(30))
        XCTAssertEqual(pair.ended(.bob), [.timeout(.connecting)])
        XCTAssertEqual(pair.ended(.alice), [.peerTimedOut], "Alice, still ringing, hears Bob's close")
    }

    func testTheHandshakeAndKeyConfirmationGet15sFromTheDataChannelOpening() {
        let pair = CallMachinePair()
        pair.loseCalleesChannel()
        pair.connect()
        XCTAssertEqual(pair.alice.call?.phase, .securing)
        assertBothTimeOut(pair, after: Fixture.seconds(15), as: .handshake)
    }

    func testASecuredCallsNextDeadlineIsItsChannelsTick() {
        let pair = CallMachinePair()
        pair.connect()
        XCTAssertEqual(pair.alice.nextDeadline, pair.alice.secureChannel?.nextTick)
        XCTAssertEqual(pair.alice.nextDeadline, Fixture.start + Fixture.seconds(3_600), "the session's hour")
    }

    func testACandidateBeforeTheRemoteDescriptionIsQueuedAndFlushedInOrderOnBothSides() {
        let pair = CallMachinePair()
        pair.ring()
        XCTAssertTrue(pair.commands(.bob).isEmpty)
        // The caller's side: two of Bob's candidates arrive before his answer.
        let early = (1...2).map { CallCandidate(candidate: "candidate:\($0) 1 udp 1 198.51.100.\($0) 9 typ host", sdpMid: nil, sdpMLineIndex: 0) }
        for candidate in early { pair.handle(.signal(pair.bob.identity.signal(.candidate(candidate), to: Fixture.alice)), on: .alice) }
        XCTAssertEqual(pair.commands(.alice), [.createOffer])
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        let host = CallCandidate(candidate: "candidate:1 1 udp 2122252543 192.0.2.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)
        XCTAssertEqual(pair.commands(.bob), [.acceptOffer(sdp: "v=0\r\na=scripted-offer\r\n"), .addRemoteCandidate(host),
                                             .addRemoteCandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))])
        pair.pump()
        XCTAssertEqual(Array(pair.commands(.alice).prefix(4)),
                       [.createOffer, .setRemoteAnswer(sdp: "v=0\r\na=scripted-answer\r\n")] + early.map(CallMediaCommand.addRemoteCandidate))
        XCTAssertEqual(pair.alice.call?.phase, .secured)
    }

    func testThe65thQueuedCandidateEndsTheCallWithCloseError() {
        let pair = CallMachinePair()
        pair.ring()
        // Alice's host candidate and end of candidates are queued already: 62 more fill the queue.
        func candidate(_ n: Int) -> CallEvent {
            .signal(pair.alice.identity.signal(.candidate(CallCandidate(candidate: "candidate:\(n) 1 udp 1 192.0.2.1 \(n) typ host", sdpMid: "0", sdpMLineIndex: 0)),
                                               to: Fixture.bob))
        }
        for n in 1...62 { pair.handle(candidate(n), on: .bob) }
        XCTAssertEqual(pair.bob.call?.phase, .invited)
        pair.handle(candidate(65), on: .bob)
        XCTAssertEqual(pair.ended(.bob), [.candidateQueueOverflow])
        XCTAssertEqual(pair.signals(.bob).map { CallSignalBody.parse($0) }, [.close(.error)])
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [.peerFailed])
    }

    func testThe17thFrameHeldBeforeTheCalleesChannelEndsTheCall() {
        let pair = CallMachinePair()
        pair.connectivity = false
        pair.connect()
        XCTAssertEqual(pair.bob.call?.phase, .connecting)
        for _ in 1...16 { pair.handle(.media(call: Fixture.callID, .channelMessage([0x01, 0x00])), on: .bob) }
        XCTAssertTrue(pair.ended(.bob).isEmpty)
        pair.handle(.media(call: Fixture.callID, .channelMessage([0x01, 0x00])), on: .bob)
        XCTAssertEqual(pair.ended(.bob), [.heldFrameOverflow])
        XCTAssertEqual(pair.signals(.bob).last.flatMap { CallSignalBody.parse($0) }, .close(.error))
        XCTAssertEqual(pair.commands(.bob).last, .close)
    }

    func testAFrameBeforeTheCalleesChannelIsHeldAndHandedOverOnceItSentChannel() throws {
        let pair = CallMachinePair()
        pair.connectivity = false
        pair.connect()
        // Alice's handshake message 1 overtakes Bob's own "open" report.
        var initiator = Fixture.channel(.initiator, now: pair.now)
        let messageOne = initiator.start(now: pair.now).frames
        XCTAssertEqual(messageOne.count, 1)
        pair.handle(.media(call: Fixture.callID, .channelMessage(messageOne[0])), on: .bob)
        XCTAssertFalse(pair.commands(.bob).contains { if case .send = $0 { true } else { false } })
        pair.clearRecords()
        pair.handle(.media(call: Fixture.callID, .channelOpen), on: .bob)
        XCTAssertEqual(pair.signals(.bob).map(\.kind), [.channel])
        let frames = pair.commands(.bob).compactMap { if case let .send(frame) = $0 { frame } else { nil } }
        XCTAssertEqual(frames.map(\.first), [0x01, 0x02], "message 2 and Bob's confirmation, after his channel")
        let answered = frames.flatMap { initiator.receive($0, now: pair.now) }
        XCTAssertTrue(answered.contains { if case .authenticated = $0 { true } else { false } })
    }
}
