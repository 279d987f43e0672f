import TetherCall
import TetherSync
import TetherWire
import XCTest

/// What a person at a keyboard does to a call: paste a burst, type before it is secured, hang
/// up mid-sentence. Every text the machine accepts is delivered and receipted, or reported as
/// not delivered; none is lost in silence, and no burst ends the call.
final class CallMachineDeliveryTests: XCTestCase {
    private func undelivered(_ pair: CallMachinePair, _ side: CallMachinePair.Side) -> [(MessageID, CallTextLoss)] {
        pair.notices(side).compactMap { if case let .undelivered(_, id, loss) = $0 { (id, loss) } else { nil } }
    }

    private func rotations(_ pair: CallMachinePair, _ side: CallMachinePair.Side) -> [Int] {
        pair.notices(side).compactMap { if case let .rotated(_, epoch) = $0 { epoch } else { nil } }
    }

    func testAPastedBurstLeavesInOrderThroughRotationsAndEveryReceiptComesBack() {
        let pair = CallMachinePair()
        pair.connect()
        let texts = (1...2_000).map { "line \($0)" }
        let start = pair.now
        let ids = pair.type(texts, from: .alice)
        XCTAssertEqual(pair.ended(.alice), [], "no burst ends the sender's own call")
        XCTAssertEqual(pair.texts(.bob), texts, "every text, in order")
        XCTAssertEqual(pair.receipts(.alice), ids, "a receipt for every one, past the 512 awaited at once")
        XCTAssertGreaterThanOrEqual(rotations(pair, .alice).count, 4, "trigger (a) every 500 frames, each completed")
        // §9.6: never more than 40 frames a second; the pacing carries 32.
        let seconds = Double(pair.now.elapsed(since: start).components.seconds)
        XCTAssertGreaterThanOrEqual(seconds, 2_000.0 / 40, "no faster than the cap")
        XCTAssertLessThanOrEqual(seconds, 2_000.0 / 32 + 10, "and at the paced rate, not slower")
    }

    /// Sends on Alice until her call's queue is full; the ids, in order.
    private func fill(_ pair: CallMachinePair) -> [MessageID] {
        var ids: [MessageID] = []
        while pair.alice.sendCapacity(for: Fixture.callID) > 0 { ids.append(pair.send("burst \(ids.count + 1)", from: .alice)) }
        return ids
    }

    func testTheChannelTakesNoMoreThanItsWindowAndNothingDuringARotation() throws {
        let pair = CallMachinePair()
        pair.connect()
        XCTAssertEqual(pair.alice.secureChannel?.sendWindow, CallChannelLimits.framesPerWindow, "one pacing window")
        let ids = fill(pair)
        XCTAssertEqual(pair.alice.secureChannel?.sendWindow, 0, "the window is full")
        XCTAssertEqual(pair.alice.secureChannel?.pacedFrameCount, CallChannelLimits.framesPerWindow,
                       "at most one window of frames waits in the pacer, whatever was typed")
        let refused = pair.send("one too many", from: .alice)
        XCTAssertTrue(pair.notices(.alice).contains(.sendRefused(call: Fixture.callID, id: refused, .queueFull)),
                      "past the queue's bound a text is refused, not queued without limit")
        pair.handle(.rotate(call: Fixture.callID), on: .alice)
        XCTAssertTrue(pair.alice.secureChannel?.isRotating == true)
        XCTAssertEqual(pair.alice.secureChannel?.sendWindow, 0, "nothing of the user's is held for a rotation")
        pair.type([], from: .alice)
        XCTAssertEqual(pair.texts(.bob), (1...ids.count).map { "burst \($0)" }, "all of it, in order, after the rotation")
        XCTAssertEqual(pair.receipts(.alice), ids)
        XCTAssertEqual(rotations(pair, .alice), [1])
        XCTAssertEqual(pair.ended(.alice), [])
    }

    func testThirtyLinesThenAHangUpAreDeliveredAndReceiptedBeforeClose() {
        let pair = CallMachinePair()
        pair.connect()
        let ids = (1...30).map { pair.send("line \($0)", from: .alice) }
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        XCTAssertEqual(pair.alice.call?.phase, .secured, "still up: the texts are on their way")
        XCTAssertEqual(pair.alice.sendCapacity(for: Fixture.callID), 0, "and it takes nothing new")
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), (1...30).map { "line \($0)" })
        XCTAssertEqual(pair.receipts(.alice), ids)
        XCTAssertEqual(pair.ended(.alice), [.hungUp], "then the close")
        XCTAssertEqual(pair.ended(.bob), [.peerHungUp])
        XCTAssertTrue(undelivered(pair, .alice).isEmpty)
        let bobSaw = pair.notices(.bob)
        let lastText = bobSaw.lastIndex { if case .message(_, .text) = $0 { true } else { false } }
        let end = bobSaw.firstIndex { if case .ended = $0 { true } else { false } }
        XCTAssertLessThan(try XCTUnwrap(lastText), try XCTUnwrap(end), "every text before the close")
    }

    func testAHangUpThatCannotDeliverReportsEachTextAndClosesAtTheGrace() {
        let pair = CallMachinePair()
        pair.connect()
        pair.dropFramesFrom = .bob     // Alice's texts arrive; Bob's receipts never do
        let sent = (1...50).map { pair.send("line \($0)", from: .alice) }
        pair.pump()
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        let hungUpAt = pair.now
        while pair.alice.call != nil { pair.advanceToDeadline(of: .alice) }
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
        XCTAssertEqual(pair.now.elapsed(since: hungUpAt), CallSetupLimits.hangUpGrace, "bounded: the grace, then close")
        let lost = undelivered(pair, .alice)
        XCTAssertEqual(lost.map(\.0), sent, "each text named, in order")
        XCTAssertEqual(Set(lost.map(\.1)), [.unconfirmed], "all of them left; none was receipted")
        let endIndex = pair.notices(.alice).firstIndex { if case .ended = $0 { true } else { false } }
        let lastLoss = pair.notices(.alice).lastIndex { if case .undelivered = $0 { true } else { false } }
        XCTAssertLessThan(lastLoss ?? .max, endIndex ?? .min, "reported before the end, so an interface can show it")
    }

    func testHangUpNowClosesAtOnceAndReportsWhatWasStillQueuedAsNotSent() throws {
        let pair = CallMachinePair()
        pair.connect()
        let ids = fill(pair)
        let inChannel = try XCTUnwrap(pair.alice.secureChannel).awaitingReceiptIDs.count
        pair.handle(.hangUpNow(call: Fixture.callID), on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
        let lost = undelivered(pair, .alice)
        XCTAssertEqual(lost.map(\.0), ids, "the channel's texts first (unconfirmed), then the queue's (not sent), in order")
        XCTAssertEqual(lost.filter { $0.1 == .unconfirmed }.count, inChannel)
        XCTAssertEqual(lost.filter { $0.1 == .notSent }.count, CallSetupLimits.outgoingTexts)
    }

    func testLinesTypedBeforeSecuredAndThenAHangUpAreDeliveredOnceSecured() {
        let pair = CallMachinePair()
        pair.ring()
        let ids = (1...3).map { pair.send("early \($0)", from: .alice) }
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        XCTAssertEqual(pair.alice.call?.phase, .ringing, "a hang-up with texts to deliver waits for the call to get there")
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["early 1", "early 2", "early 3"])
        XCTAssertEqual(pair.receipts(.alice), ids)
        XCTAssertEqual(pair.ended(.alice), [.hungUp])
    }

    func testAHangUpWithNothingToDeliverEndsAtOnce() {
        let pair = CallMachinePair()
        pair.ring()
        pair.handle(.hangUp(call: Fixture.callID), on: .alice)
        XCTAssertEqual(pair.ended(.alice), [.hungUp], "ringing with nothing typed: a hang-up is a hang-up")
        let secured = CallMachinePair()
        secured.connect()
        secured.handle(.hangUp(call: Fixture.callID), on: .alice)
        XCTAssertEqual(secured.ended(.alice), [.hungUp])
    }

    func testACallThatFailsReportsItsUndeliveredTextsToo() {
        let pair = CallMachinePair()
        pair.connect()
        pair.dropFramesFrom = .bob
        let ids = (1...3).map { pair.send("line \($0)", from: .alice) }
        pair.pump()
        pair.tamperNextFrame = .alice
        pair.dropFramesFrom = nil
        pair.send("tampered", from: .alice)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice).count, 1, "the peer's channel failed and closed")
        XCTAssertEqual(Array(undelivered(pair, .alice).map(\.0).prefix(3)), ids, "the texts without receipts are named")
    }

    func testAPeersCloseThatOvertakesItsLastReceiptWaitsForIt() {
        let pair = CallMachinePair()
        pair.connect()
        pair.delayFramesFrom = .bob      // Bob's receipt, then his channel's close, are on their way
        let bye = pair.send("bye", from: .alice)
        pair.pump()
        XCTAssertEqual(pair.texts(.bob), ["bye"])
        pair.handle(.hangUp(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [], "Bob's close came first: Alice waits for the receipt it overtook")
        XCTAssertEqual(pair.alice.sendCapacity(for: Fixture.callID), 0, "and takes nothing new")
        pair.deliverInFlight()
        XCTAssertEqual(pair.receipts(.alice), [bye])
        XCTAssertEqual(pair.ended(.alice), [.peerHungUp])
        XCTAssertTrue(undelivered(pair, .alice).isEmpty, "nothing reported lost")
    }

    func testAPeersCloseWithReceiptsThatNeverComeEndsAtTheGraceNamingThem() {
        let pair = CallMachinePair()
        pair.connect()
        pair.delayFramesFrom = .bob      // and they never arrive: neither the receipt nor the channel's close
        let sent = pair.send("unanswered", from: .alice)
        pair.pump()
        pair.handle(.hangUpNow(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.ended(.alice), [])
        pair.advanceToDeadline(of: .alice)
        XCTAssertEqual(pair.ended(.alice), [.peerHungUp])
        XCTAssertEqual(undelivered(pair, .alice).map(\.0), [sent])
    }
}
