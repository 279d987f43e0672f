@testable import TetherRTC
import TetherTestSupport
import XCTest

/// Two associations over an in-memory packet pipe (no DTLS): the SCTP association comes up,
/// DCEP opens `cryptext`, messages cross whole and in order, and the channel and association
/// close as RFC 8831 §6.7 and Tether's rules say.
final class DataChannelAssociationTests: XCTestCase {
    func assertSendRefused(_ association: DataChannelAssociation, _ expected: DataChannelSendError,
                           file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try association.send([1]), file: file, line: line) {
            XCTAssertEqual($0 as? DataChannelSendError, expected, file: file, line: line)
        }
    }

    func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    func testBothSidesConnectAndOpenTheCryptextChannelOnTheOpenersParity() throws {
        let pair = try AssociationPair()
        defer { pair.close() }
        pair.waitUntilOpen()
        XCTAssertEqual(pair.a.channelStream, 0, "the DTLS client opens an even stream")
        XCTAssertEqual(pair.b.channelStream, 0)
        XCTAssertEqual(pair.logA.all, [.channelOpen])
        XCTAssertEqual(pair.logB.all, [.channelOpen])
        eventually("the opener's ACK", within: rtcPatience, poll: 0.002) { pair.a.queue.sync { pair.a.ackReceived } }

        let serverOpens = try AssociationPair(a: DataChannelConfiguration(role: .server, opensChannel: true),
                                              b: DataChannelConfiguration(role: .client, opensChannel: false))
        defer { serverOpens.close() }
        serverOpens.waitUntilOpen()
        XCTAssertEqual(serverOpens.a.channelStream, 1, "the DTLS server opens an odd stream")
        XCTAssertEqual(serverOpens.b.channelStream, 1)
    }

    func testMessagesArriveWholeAndInOrderBothWaysIncludingFullFramesAnd64KiBAndEmpty() throws {
        let pair = try AssociationPair()
        defer { pair.close() }
        pair.waitUntilOpen()
        let fromA = [bytes(1, seed: 1), bytes(32_785, seed: 2), [], bytes(65_536, seed: 3), bytes(1200, seed: 4), bytes(32_785, seed: 5)]
        let fromB = [bytes(65_536, seed: 6), [], bytes(7, seed: 7), bytes(32_785, seed: 8), []]
        for message in fromA { try pair.a.send(message) }
        for message in fromB { try pair.b.send(message) }
        eventually("every message", within: rtcPatience, poll: 0.002) { pair.logB.messages.count == fromA.count && pair.logA.messages.count == fromB.count }
        XCTAssertEqual(pair.logB.messages, fromA)
        XCTAssertEqual(pair.logA.messages, fromB)
        pair.assertNeitherFailed()
    }

    func testDroppedPacketsAreRetransmittedAndMessagesStillArriveInOrder() throws {
        // Every fifth packet each way is lost, the handshake's included.
        let pipe = PacketPipe(drop: { _, index in index % 5 == 2 })
        let pair = try AssociationPair(pipe: pipe)
        defer { pair.close() }
        pair.waitUntilOpen()
        let fromA = (0..<40).map { bytes(($0 * 977) % 40_000, seed: UInt8($0)) }
        let fromB = (0..<40).map { bytes(($0 * 1_531) % 20_000 + 1, seed: UInt8(100 + $0)) }
        for message in fromA { try pair.a.send(message) }
        for message in fromB { try pair.b.send(message) }
        eventually("every message despite the losses", within: 60, poll: 0.002) {
            pair.logB.messages.count == fromA.count && pair.logA.messages.count == fromB.count
        }
        XCTAssertEqual(pair.logB.messages, fromA)
        XCTAssertEqual(pair.logA.messages, fromB)
        XCTAssertGreaterThan(pipe.dropped, 10)
    }

    func testSendsAboveThePeersMaxMessageSizeOrTheLocalBoundAreRefused() throws {
        let pair = try AssociationPair(a: DataChannelConfiguration(role: .client, opensChannel: true, peerMaxMessageSize: 40_000))
        defer { pair.close() }
        pair.waitUntilOpen()
        XCTAssertThrowsError(try pair.a.send(bytes(40_001, seed: 0))) {
            XCTAssertEqual($0 as? DataChannelSendError, .messageTooLarge(size: 40_001, limit: 40_000))
        }
        XCTAssertThrowsError(try pair.b.send(bytes(65_537, seed: 0))) {
            XCTAssertEqual($0 as? DataChannelSendError, .messageTooLarge(size: 65_537, limit: 65_536))
        }
        let unlimitedPeer = DataChannelConfiguration(role: .client, opensChannel: true, peerMaxMessageSize: 0)
        XCTAssertEqual(unlimitedPeer.sendLimit, 65_536, "a=max-message-size:0 leaves the local bound")
        try pair.a.send(bytes(40_000, seed: 9))
        eventually("the message at the limit", within: rtcPatience, poll: 0.002) { pair.logB.messages.count == 1 }
        XCTAssertEqual(pair.logB.messages, [bytes(40_000, seed: 9)])
    }

    func testSendsBeforeTheChannelIsOpenAreRefused() throws {
        // No peer: the association never comes up.
        let lonely = try DataChannelAssociation(configuration: DataChannelConfiguration(role: .client, opensChannel: true),
                                                sendPacket: { _ in }, onEvent: { _ in })
        defer { lonely.close() }
        assertSendRefused(lonely, .notOpen)
    }

    func testAnIncomingMessageAboveTheAdvertisedMaximumAbortsTheAssociation() throws {
        // A believes B takes 256 KiB; B advertised (and enforces) 64 KiB. usrsctp hands B the
        // message in pieces from its partial delivery point (64 KiB) on, so B stops at the first.
        let pair = try AssociationPair(a: DataChannelConfiguration(role: .client, opensChannel: true,
                                                                   peerMaxMessageSize: 262_144, maxMessageSize: 262_144))
        defer { pair.close() }
        pair.waitUntilOpen()
        try pair.a.send(bytes(200_000, seed: 1))
        eventually("B's violation", within: rtcPatience, poll: 0.002) { pair.logB.failure != nil }
        XCTAssertEqual(pair.logB.failure, .protocolViolation(.messageTooLarge(limit: 65_536)))
        XCTAssertEqual(pair.logB.messages, [])
        eventually("A sees the abort", within: rtcPatience, poll: 0.002) { pair.logA.failure != nil }
        XCTAssertEqual(pair.logA.failure, .associationLost)
        assertSendRefused(pair.a, .closed)
    }

    func testOpensWithAnotherLabelTypeProtocolOrParityAreRefusedByStreamReset() throws {
        // Neither side opens, so A's crafted DATA_CHANNEL_OPENs are the only ones.
        let pair = try AssociationPair(a: DataChannelConfiguration(role: .client, opensChannel: false))
        defer { pair.close() }
        eventually("the association", within: rtcPatience, poll: 0.002) { pair.a.phase == .awaitingOpen && pair.b.phase == .awaitingOpen }
        let opens: [(UInt16, [UInt8])] = [
            (0, DCEPMessage.open(DCEPOpen(channelType: .reliable, priority: 256, reliabilityParameter: 0, label: "chat", protocol: "")).encoded()),
            (2, DCEPMessage.open(DCEPOpen(channelType: .reliableUnordered, priority: 256, reliabilityParameter: 0, label: "cryptext", protocol: "")).encoded()),
            (4, DCEPMessage.open(DCEPOpen(channelType: .reliable, priority: 256, reliabilityParameter: 0, label: "cryptext", protocol: "noise")).encoded()),
            (1, DCEPMessage.open(.cryptext).encoded()),
            (6, [0x03, 0x00]),
        ]
        for (stream, open) in opens {
            pair.a.queue.async { pair.a.enqueue(OutgoingMessage(stream: stream, ppid: .webRTCDCEP, payload: open)) }
        }
        eventually("every refusal", within: rtcPatience, poll: 0.002) { pair.logB.refusals.count == opens.count }
        XCTAssertEqual(pair.logB.refusals, [.wrongLabel("chat"), .notReliableOrdered(.reliableUnordered), .unexpectedProtocol("noise"),
                                            .streamParity(stream: 1), .malformed(.truncated)])
        XCTAssertFalse(pair.logB.contains(.channelOpen))
        XCTAssertEqual(pair.b.phase, .awaitingOpen, "refusing is no failure")
    }

    func testASecondChannelIsRefusedAndTheFirstKeepsWorking() throws {
        let pair = try AssociationPair()
        defer { pair.close() }
        pair.waitUntilOpen()
        let open = DCEPMessage.open(.cryptext).encoded()
        pair.a.queue.async { pair.a.enqueue(OutgoingMessage(stream: 2, ppid: .webRTCDCEP, payload: open)) }
        pair.b.queue.async { pair.b.enqueue(OutgoingMessage(stream: 3, ppid: .webRTCDCEP, payload: open)) }
        eventually("both refusals", within: rtcPatience, poll: 0.002) { pair.logB.refusals.count == 1 && pair.logA.refusals.count == 1 }
        XCTAssertEqual(pair.logB.refusals, [.secondChannel(stream: 2)])
        XCTAssertEqual(pair.logA.refusals, [.secondChannel(stream: 3)], "the opener takes no channel from the peer")
        try pair.a.send([1, 2, 3])
        try pair.b.send([4, 5])
        eventually("messages on the first channel", within: rtcPatience, poll: 0.002) { pair.logB.messages == [[1, 2, 3]] && pair.logA.messages == [[4, 5]] }
        pair.assertNeitherFailed()
    }

    func testClosingTheChannelResetsItsStreamAndThePeerSeesItClosedAfterTheQueuedMessages() throws {
        let pair = try AssociationPair()
        defer { pair.close() }
        pair.waitUntilOpen()
        let queued = (0..<5).map { bytes(30_000, seed: UInt8($0)) }
        for message in queued { try pair.a.send(message) }
        pair.a.closeChannel()
        eventually("both ends closed", within: rtcPatience, poll: 0.002) { pair.logA.contains(.channelClosed) && pair.logB.contains(.channelClosed) }
        XCTAssertEqual(pair.logB.messages, queued, "the reset follows what was queued before it")
        XCTAssertEqual(pair.logB.all.last, .channelClosed)
        assertSendRefused(pair.a, .closed)
        assertSendRefused(pair.b, .closed)
        pair.assertNeitherFailed()
    }

    func testClosingTheAssociationAbortsItAndThePeerSeesItLost() throws {
        let pair = try AssociationPair()
        defer { pair.close() }
        pair.waitUntilOpen()
        pair.a.close()
        eventually("B's failure", within: rtcPatience, poll: 0.002) { pair.logB.failure != nil }
        XCTAssertEqual(pair.logB.failure, .associationLost)
        XCTAssertEqual(pair.logA.all, [.channelOpen], "nothing is reported after close")
        assertSendRefused(pair.a, .closed)
    }
}
