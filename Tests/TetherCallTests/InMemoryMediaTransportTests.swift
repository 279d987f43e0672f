import TetherCall
import TetherSync
import XCTest

/// The in-memory media transport behaves like a pair of WebRTC peer connections with one
/// reliable, ordered data channel.
final class InMemoryMediaTransportTests: XCTestCase {
    private let network = InMemoryMediaNetwork()
    private let offererEvents = MediaRecorder(), answererEvents = MediaRecorder()
    private lazy var offerer = transport(offererEvents)
    private lazy var answerer = transport(answererEvents)

    private func transport(_ recorder: MediaRecorder) -> InMemoryMediaTransport {
        let transport = network.makeTransport()
        transport.delegate = recorder
        return transport
    }

    /// Offer, answer and both descriptions; candidates exchanged as `exchange` says.
    private func negotiate(offererCandidates: Bool = true, answererCandidates: Bool = true) throws {
        offerer.perform(.createOffer)
        network.drain()
        answerer.perform(.acceptOffer(sdp: try XCTUnwrap(offererEvents.description)))
        network.drain()
        offerer.perform(.setRemoteAnswer(sdp: try XCTUnwrap(answererEvents.description)))
        if answererCandidates { answererEvents.candidates.forEach { offerer.perform(.addRemoteCandidate($0)) } }
        if offererCandidates { offererEvents.candidates.forEach { answerer.perform(.addRemoteCandidate($0)) } }
        network.drain()
    }

    func testTwoEndsFindEachOtherByTheOffersTokenAndOpenTheChannelOnce() throws {
        try negotiate()
        let offer = try XCTUnwrap(offererEvents.description)
        XCTAssertTrue(offer.hasPrefix("v=0\r\n"))
        XCTAssertTrue(offer.contains("\r\na=tether-inmemory:"))
        XCTAssertEqual(offererEvents.candidates.count, 2)
        XCTAssertEqual(offererEvents.candidates.last, .endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertTrue(offererEvents.candidates.allSatisfy(\.isWellFormed))
        XCTAssertNotEqual(offererEvents.description, answererEvents.description)
        XCTAssertEqual(offererEvents.events.filter { $0 == .channelOpen }.count, 1)
        XCTAssertEqual(answererEvents.events.filter { $0 == .channelOpen }.count, 1)
        XCTAssertEqual(answererEvents.events.last, .channelOpen)
    }

    func testTheChannelOpensOnlyOnceEachEndHasOneOfTheOthersCandidates() throws {
        try negotiate(offererCandidates: false)
        XCTAssertFalse(offererEvents.events.contains(.channelOpen))
        answerer.perform(.addRemoteCandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0)))
        answerer.perform(.addRemoteCandidate(CallCandidate(candidate: "candidate:1 1 udp 1 203.0.113.1 9 typ host ufrag nobody", sdpMid: "0", sdpMLineIndex: 0)))
        network.drain()
        XCTAssertFalse(answererEvents.events.contains(.channelOpen), "neither the end marker nor a stranger's candidate connects")
        answerer.perform(.addRemoteCandidate(offererEvents.candidates[0]))
        network.drain()
        XCTAssertTrue(offererEvents.events.contains(.channelOpen))
        XCTAssertTrue(answererEvents.events.contains(.channelOpen))
    }

    func testMessagesArriveIntactAndInOrderBothWays() throws {
        try negotiate()
        let forth = (0..<200).map { [UInt8(truncatingIfNeeded: $0), 0x02, UInt8($0 % 7)] }
        let back = (0..<50).map { [UInt8($0), 0xFF] }
        for (a, b) in zip(forth, back + Array(repeating: [], count: 150)) {
            offerer.perform(.send(a))
            if !b.isEmpty { answerer.perform(.send(b)) }
        }
        network.drain()
        XCTAssertEqual(answererEvents.messages, forth)
        XCTAssertEqual(offererEvents.messages, back)
    }

    func testTamperingFlipsOneBitOfTheNextMessageOnly() throws {
        try negotiate()
        offerer.tamperNextMessage()
        offerer.perform(.send([1, 2, 3]))
        offerer.perform(.send([1, 2, 3]))
        network.drain()
        XCTAssertEqual(answererEvents.messages, [[1, 2, 2], [1, 2, 3]])
    }

    func testClosingOneEndClosesThePeersChannelAndSilencesBoth() throws {
        try negotiate()
        offerer.perform(.close)
        offerer.perform(.send([9]))
        answerer.perform(.send([8]))
        network.drain()
        XCTAssertEqual(answererEvents.events.last, .channelClosed)
        XCTAssertEqual(offererEvents.events.last, .channelOpen, "the end that closed hears nothing more")
        XCTAssertTrue(answererEvents.messages.isEmpty)
        XCTAssertTrue(offererEvents.messages.isEmpty)
    }

    func testASimulatedFailureReportsFailedAndClosesThePeersChannel() throws {
        try negotiate()
        answerer.simulateFailure()
        network.drain()
        XCTAssertEqual(answererEvents.events.last, .failed)
        XCTAssertEqual(offererEvents.events.last, .channelClosed)
    }

    func testASimulatedChannelCloseReachesBothEndsOnce() throws {
        try negotiate()
        offerer.simulateChannelClose()
        network.drain()
        XCTAssertEqual(offererEvents.events.filter { $0 == .channelClosed }.count, 1)
        XCTAssertEqual(answererEvents.events.filter { $0 == .channelClosed }.count, 1)
    }

    func testCommandsWebRTCWouldRefuseReportFailed() throws {
        let cases: [(String, [CallMediaCommand])] = [
            ("an offer nobody made", [.acceptOffer(sdp: "v=0\r\na=tether-inmemory:0123456789abcdef\r\n")]),
            ("not an in-memory SDP", [.acceptOffer(sdp: "v=0\r\n")]),
            ("a candidate before the remote description", [.createOffer, .addRemoteCandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))]),
            ("a message before the channel opened", [.createOffer, .send([1])]),
            ("a second offer", [.createOffer, .createOffer]),
            ("an answer without a peer", [.createOffer, .setRemoteAnswer(sdp: "v=0\r\na=tether-inmemory:00\r\n")]),
        ]
        for (name, commands) in cases {
            let recorder = MediaRecorder()
            let end = transport(recorder)
            commands.forEach(end.perform)
            end.perform(.createOffer)
            network.drain()
            XCTAssertEqual(recorder.events.last, .failed, name)
            XCTAssertEqual(recorder.events.filter { $0 == .failed }.count, 1, "\(name): nothing after the failure")
        }
    }

    func testAnOfferIsTakenByOneAnswererOnly() throws {
        offerer.perform(.createOffer)
        network.drain()
        let offer = try XCTUnwrap(offererEvents.description)
        answerer.perform(.acceptOffer(sdp: offer))
        let second = MediaRecorder()
        transport(second).perform(.acceptOffer(sdp: offer))
        network.drain()
        XCTAssertNotNil(answererEvents.description)
        XCTAssertEqual(second.events, [.failed])
    }

    func testReportsNeverRunInsideThePerformCall() {
        let probe = ReentrancyProbe()
        let end = network.makeTransport()
        end.delegate = probe
        end.perform(.createOffer)
        probe.performReturned.signal()
        network.drain()
        XCTAssertEqual(probe.verdicts, [true, true, true], "each report came after perform returned")
    }
}

/// Waits in its first report for the test to say `perform` returned: a report made inside
/// `perform` would wait in vain.
private final class ReentrancyProbe: CallMediaTransportDelegate, Sendable {
    let performReturned = DispatchSemaphore(value: 0)
    private let recorder = MediaRecorder()

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        let returned = performReturned.wait(timeout: .now() + 2) == .success
        performReturned.signal()
        recorder.mediaTransport(transport, didReport: returned ? .channelOpen : .failed)
    }

    var verdicts: [Bool] { recorder.events.map { $0 == .channelOpen } }
}
