import TetherCall
import TetherTestSupport
import TetherWire
import TetherSync
import XCTest

/// Two channels talking: handshake, confirmation, chat, receipts, rotation and pacing (§9, §10,
/// §13.1).
final class CallChannelConversationTests: XCTestCase {
    private let safetyNumber = "87123 91341 61965 52377 79898 65120 99612 99002 60117 21426 28131 82440"

    func testTheHandshakeAuthenticatesBothSidesWithOneSessionIDAndSafetyNumber() {
        let pair = ChannelPair()
        pair.connect()
        XCTAssertEqual(pair.events(.alice), [.authenticated(safetyNumber: safetyNumber)])
        XCTAssertEqual(pair.events(.bob), [.authenticated(safetyNumber: safetyNumber)])
        XCTAssertEqual(pair.alice.sessionID?.count, 32)
        XCTAssertEqual(pair.alice.sessionID, pair.bob.sessionID)
        XCTAssertEqual(pair.alice.safetyNumber, safetyNumber)
        XCTAssertEqual(pair.framesFromAlice, 2, "message 1 and the confirmation")
        XCTAssertEqual(pair.framesFromBob, 2, "message 2 and the confirmation")
    }

    func testFreshEphemeralsGiveEveryCallItsOwnSessionID() {
        let first = ChannelPair(), second = ChannelPair()
        first.connect()
        second.connect()
        XCTAssertNotNil(first.alice.sessionID)
        XCTAssertNotEqual(first.alice.sessionID, second.alice.sessionID)
    }

    func testTextsFlowBothWaysAndEachIsAnsweredByOneReceipt() throws {
        let pair = ChannelPair()
        pair.connect()
        let hello = try pair.send("hello Bob 👋", from: .alice, sentAt: 1_700_000_000_001)
        let reply = try pair.send("hi \"Alice\"\n\\ é", from: .bob, sentAt: 1_700_000_000_002)
        pair.pump()
        XCTAssertEqual(pair.deliveries(.bob).first, .text(id: hello, text: "hello Bob 👋", sentAt: 1_700_000_000_001))
        XCTAssertEqual(pair.deliveries(.alice).first, .text(id: reply, text: "hi \"Alice\"\n\\ é", sentAt: 1_700_000_000_002))
        XCTAssertEqual(pair.receipts(.alice), [hello])
        XCTAssertEqual(pair.receipts(.bob), [reply])
        XCTAssertNil(pair.failure(.alice))
        XCTAssertNil(pair.failure(.bob))
    }

    func testTheLongestTextAndTheLargestScalarsPass() throws {
        let pair = ChannelPair()
        pair.connect()
        let longest = String(repeating: "𝄞", count: 4_000)
        try pair.send(longest, from: .alice)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), [longest])
    }

    func testARepeatedTextIsDroppedWithoutASecondReceipt() throws {
        let pair = ChannelPair()
        pair.connect()
        let id = try pair.send("once", from: .alice)
        try pair.send("once", from: .alice, id: id)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["once"])
        XCTAssertEqual(pair.receipts(.alice), [id])
        XCTAssertEqual(pair.framesFromBob, 3, "message 2, the confirmation and one receipt")
    }

    func testDeduplicationRemembersTheLast512Texts() throws {
        let pair = ChannelPair()
        pair.connect()
        let first = try pair.send("0", from: .alice)
        for n in 1...512 {
            try pair.send("\(n)", from: .alice)
            pair.settle()
        }
        try pair.send("again", from: .alice, id: first)
        pair.settle()
        XCTAssertEqual(pair.texts(.bob).count, 514, "513 texts pushed the first one out of the window")
        XCTAssertEqual(pair.texts(.bob).last, "again")
        XCTAssertNil(pair.failure(.bob))
    }

    func testSendingBeforeConfirmationIsRefusedAndNothingLeaves() {
        let pair = ChannelPair()
        XCTAssertThrowsError(try pair.alice.sendText("early", id: .random(), sentAt: 0, now: pair.now)) { error in
            XCTAssertEqual(error as? CallSendError, .notAuthenticated)
        }
        XCTAssertThrowsError(try pair.alice.rotate(now: pair.now)) { error in
            XCTAssertEqual(error as? CallSendError, .notAuthenticated)
        }
        pair.absorb(pair.alice.start(now: pair.now), from: .alice)
        pair.deliverPending(to: .bob)
        XCTAssertThrowsError(try pair.bob.sendText("early", id: .random(), sentAt: 0, now: pair.now), "Bob has not read Alice's confirmation")
        pair.pump()
        XCTAssertNoThrow(try pair.bob.sendText("now", id: .random(), sentAt: 0, now: pair.now))
    }

    func testATextBreakingALimitIsRefusedAndTheChannelCarriesOn() throws {
        let pair = ChannelPair()
        pair.connect()
        for (text, sentAt, problem) in [("", Int64(0), CallPayloadProblem.textLength),
                                        (String(repeating: "a", count: 4_001), 0, .textLength),
                                        ("ok", Int64(1) << 53 + 1, .field("sentAt"))] {
            XCTAssertThrowsError(try pair.alice.sendText(text, id: .random(), sentAt: sentAt, now: pair.now)) { error in
                XCTAssertEqual(error as? CallSendError, .invalidPayload(problem))
            }
        }
        try pair.send("still here", from: .alice)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["still here"])
    }

    func testFiveHundredFramesUnderOneEpochRotateBeforeTheNextMessage() throws {
        let pair = ChannelPair()
        pair.connect()
        // Alice's confirmation was her first transport frame of epoch 0.
        for n in 1...499 {
            try pair.send("m\(n)", from: .alice)
            pair.settle()
        }
        XCTAssertEqual(pair.alice.epoch, 0)
        XCTAssertEqual(pair.rotations(.alice), [])
        try pair.send("m500", from: .alice)
        XCTAssertTrue(pair.alice.isRotating, "ROTATE_INIT went first; the text waits")
        pair.settle()
        XCTAssertEqual(pair.rotations(.alice), [1])
        XCTAssertEqual(pair.rotations(.bob), [1])
        XCTAssertEqual(pair.texts(.bob).count, 500)
        XCTAssertEqual(pair.texts(.bob).last, "m500")
        XCTAssertEqual(pair.receipts(.alice).count, 500)
        // Bob sent 499 receipts under epoch 0 besides his confirmation and ROTATE_RESP; the
        // receipts he sends next go under epoch 1 and trigger nothing.
        try pair.send("after", from: .bob)
        pair.settle()
        XCTAssertEqual(pair.texts(.alice), ["after"])
        XCTAssertEqual(pair.bob.epoch, 1)
        XCTAssertNil(pair.failure(.alice) ?? pair.failure(.bob))
    }

    func testTenMinutesIntoAnEpochTheNextMessageRotatesFirst() throws {
        let pair = ChannelPair()
        pair.connect()
        try pair.send("before", from: .bob)
        pair.settle()
        pair.advance(by: Fixture.seconds(599))
        try pair.send("at 9:59", from: .bob)
        pair.settle()
        XCTAssertEqual(pair.bob.epoch, 0)
        pair.advance(by: Fixture.seconds(1))
        XCTAssertEqual(pair.rotations(.bob), [], "time alone sends nothing")
        try pair.send("at 10:00", from: .bob)
        pair.settle()
        XCTAssertEqual(pair.rotations(.bob), [1])
        XCTAssertEqual(pair.rotations(.alice), [1])
        XCTAssertEqual(pair.texts(.alice), ["before", "at 9:59", "at 10:00"])
        pair.advance(by: Fixture.seconds(599))
        try pair.send("epoch 1 is 9:59 old", from: .alice)
        pair.settle()
        XCTAssertEqual(pair.alice.epoch, 1, "the new epoch's clock started at the switch")
        XCTAssertEqual(pair.texts(.bob), ["epoch 1 is 9:59 old"])
    }

    func testARotationWhileThePeerIsSendingKeepsEveryMessage() throws {
        let pair = ChannelPair()
        pair.connect()
        try pair.rotate(.alice)
        // Bob's texts under epoch 0 cross Alice's ROTATE_INIT; Alice's own wait in her queue.
        try pair.send("b1", from: .bob)
        try pair.send("b2", from: .bob)
        try pair.send("a1", from: .alice)
        pair.deliverPending(to: .alice)
        XCTAssertEqual(pair.texts(.alice), ["b1", "b2"])
        XCTAssertTrue(pair.alice.isRotating)
        pair.settle()
        XCTAssertEqual(pair.texts(.bob), ["a1"])
        XCTAssertEqual(Set(pair.receipts(.bob)).count, 2)
        XCTAssertEqual(pair.receipts(.alice).count, 1)
        XCTAssertEqual([pair.alice.epoch, pair.bob.epoch], [1, 1])
        for n in 2...3 {
            try pair.rotate(n == 2 ? .bob : .alice)
            try pair.send("after \(n)", from: .alice)
            pair.settle()
            XCTAssertEqual([pair.alice.epoch, pair.bob.epoch], [n, n])
        }
        XCTAssertEqual(pair.texts(.bob), ["a1", "after 2", "after 3"])
    }

    func testCrossingRotationRequestsTheCallersWinsWhicheverAsksFirst() throws {
        for callerFirst in [true, false] {
            let pair = ChannelPair()
            pair.connect()
            try pair.rotate(callerFirst ? .alice : .bob)
            try pair.rotate(callerFirst ? .bob : .alice)
            try pair.send("held by Bob", from: .bob)
            try pair.send("held by Alice", from: .alice)
            XCTAssertTrue(pair.alice.isRotating && pair.bob.isRotating)
            pair.settle()
            XCTAssertEqual(pair.rotations(.alice), [1], "one rotation, not two")
            XCTAssertEqual(pair.rotations(.bob), [1])
            XCTAssertEqual(pair.texts(.alice), ["held by Bob"])
            XCTAssertEqual(pair.texts(.bob), ["held by Alice"])
            XCTAssertEqual(pair.receipts(.alice).count, 1)
            XCTAssertEqual(pair.receipts(.bob).count, 1)
            XCTAssertNil(pair.failure(.alice) ?? pair.failure(.bob))
            try pair.send("epoch 1", from: .bob)
            pair.settle()
            XCTAssertEqual(pair.texts(.alice).last, "epoch 1")
        }
    }

    func testFortyFramesLeaveAtOnceAndTheFortyFirstAfterThePacingWindow() throws {
        let pair = ChannelPair()
        pair.connect()
        pair.advance(by: Fixture.seconds(2))
        let start = pair.now
        var out = 0
        for n in 1...41 {
            out += try pair.alice.sendText("\(n)", id: .random(), sentAt: 0, now: start).frames.count
        }
        XCTAssertEqual(out, 40)
        XCTAssertEqual(pair.alice.pacedFrameCount, 1)
        // 1.25 s, not the peer's 1 s (jitter margin), and one nanosecond more: windows include
        // their last instant.
        let window = CallChannelLimits.pacingWindow
        XCTAssertEqual(pair.alice.nextTick, start + window + .nanoseconds(1))
        XCTAssertEqual(pair.alice.tick(now: start + window), [])
        XCTAssertEqual(pair.alice.tick(now: start + window + .nanoseconds(1)).frames.count, 1)
        XCTAssertEqual(pair.alice.pacedFrameCount, 0)
        XCTAssertEqual(pair.alice.nextTick, Fixture.start + CallChannelLimits.sessionDuration, "only the session's end remains")
    }

    func testPacingSpreadsABurstSoThePeerNeverSeesFortyOneInAWindow() throws {
        let pair = ChannelPair()
        pair.connect()
        // The handshake frames count too: the window that holds them admits only 38 more.
        for n in 1...200 { try pair.send("\(n)", from: .alice) }
        pair.settle()
        XCTAssertEqual(pair.texts(.bob).count, 200)
        XCTAssertEqual(pair.receipts(.alice).count, 200)
        XCTAssertNil(pair.failure(.bob) ?? pair.failure(.alice))
        XCTAssertGreaterThanOrEqual(pair.now - Fixture.start, CallChannelLimits.pacingWindow * 5, "202 frames need at least five windows")
    }

    func testTheRotationQueueFlushIsPacedToo() throws {
        let pair = ChannelPair()
        pair.connect()
        pair.advance(by: Fixture.seconds(2))
        try pair.rotate(.alice)
        for n in 1...64 { try pair.send("\(n)", from: .alice) }
        XCTAssertEqual(pair.framesFromAlice, 3, "ROTATE_INIT only: the texts are held")
        pair.deliverPending(to: .bob)
        pair.deliverPending(to: .alice)
        XCTAssertEqual(pair.alice.epoch, 1)
        XCTAssertEqual(pair.framesFromAlice, 2 + 40, "ROTATE_INIT and 39 held texts fill the window")
        XCTAssertEqual(pair.alice.pacedFrameCount, 25)
        pair.settle()
        XCTAssertEqual(pair.texts(.bob).count, 64)
        XCTAssertNil(pair.failure(.bob))
    }
}

