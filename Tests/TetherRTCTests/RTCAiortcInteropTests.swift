import Foundation
import TetherCall
import TetherNet
import TetherRTC
import TetherTestSupport
import TetherWire
import XCTest

/// `RTCMediaTransport` against an independent WebRTC stack, aiortc (Tests/Peers/rtc_peer.py),
/// on loopback in both directions: Tether offers and aiortc answers, aiortc offers and Tether
/// answers; the `cryptext` channel opens on both sides and binary messages (up to a whole
/// secure-channel frame) cross both ways.
final class RTCAiortcInteropTests: AiortcInteropCase {
    func testTetherOffersAiortcAnswersAndMessagesCrossBothWays() throws {
        let (transport, events) = transport()
        let peer = try RTCPeer("answer")
        transport.perform(.createOffer)
        try peer.send(["sdp": try complete(events)])
        let answer = try XCTUnwrap(peer.record(within: 15) { $0["sdp"] as? String }, peer.errors)
        transport.perform(.setRemoteAnswer(sdp: answer))
        try exchangeMessages(transport, events, peer)
        transport.perform(.close)
        try peer.send(["close": true])
        XCTAssertEqual(peer.finish(), 0, peer.errors)
    }

    func testAiortcOffersTetherAnswersAndMessagesCrossBothWays() throws {
        let (transport, events) = transport()
        let peer = try RTCPeer("offer")
        let offer = try XCTUnwrap(peer.record(within: 15) { $0["sdp"] as? String }, peer.errors)
        transport.perform(.acceptOffer(sdp: offer))
        try peer.send(["sdp": try complete(events)])
        try exchangeMessages(transport, events, peer)
        transport.perform(.close)
        try peer.send(["close": true])
        XCTAssertEqual(peer.finish(), 0, peer.errors)
    }

    func testAMalformedOfferIsAFailureAndNothingElse() {
        let (transport, events) = transport()
        transport.perform(.acceptOffer(sdp: "v=0\r\nthis is not SDP\r\n"))
        XCTAssertNotNil(events.first(within: 5) { $0 == .failed ? true : nil })
        XCTAssertEqual(events.all, [.failed], "no description, no candidate after a refused offer")
    }
}

/// The same two directions relay-only through a real coturn on loopback, with the TURN REST
/// credentials a real `tether signal` (TURN_MODE=coturn) issues at registration, fetched as the
/// SDK fetches them (a `SignalingClient`'s `registered`), one registration per side. aiortc runs
/// with iceTransportPolicy relay, so both descriptions carry relayed candidates only and the
/// pair Tether selects is relay on both ends.
final class RTCAiortcRelayInteropTests: AiortcInteropCase {
    var coturn: CoturnFixture!
    var signal: ServiceProcess!
    var group: EventLoopGroup!
    var turnURL: String { "turn:127.0.0.1:\(coturn.port)?transport=udp" }

    override func setUpWithError() throws {
        coturn = try CoturnFixture()
        signal = try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", "0"],
                                    environment: ["TURN_MODE": "coturn", "TURN_SECRET": coturn.secret, "TURN_URLS": turnURL],
                                    expecting: "signal: listening on")
        group = try EventLoopGroup(count: 1)
    }

    override func tearDown() {
        signal?.stop()
        coturn?.stop()
        group?.shutdown()
    }

    /// What `registered` hands a fresh identity.
    func issuedICEServers() throws -> [ICEServer] {
        let events = WaitableLog<SignalingClient.Event>()
        let endpoint = try SignalingEndpoint("ws://127.0.0.1:\(signal.port)/signal", allowLoopbackWS: true)
        let client = try SignalingClient(endpoint: endpoint, identity: CallIdentity(), loop: group.next(), reconnects: false) { events.append($0) }
        client.start()
        defer { client.stop() }
        let registration = try XCTUnwrap(events.first(within: 10) { if case let .registered(r) = $0 { r } else { nil } }, "registered")
        XCTAssertEqual(registration.iceServers.flatMap(\.urls), [turnURL])
        XCTAssertNotNil(registration.iceServers.first?.credential, "TURN REST credentials issued")
        return registration.iceServers
    }

    /// aiortc's arguments for the other registration's servers, as JSON (signaling.md §8.4).
    func aiortc(_ command: String) throws -> RTCPeer {
        let servers = try issuedICEServers().map { server -> [String: Any] in
            var entry: [String: Any] = ["urls": server.urls]
            if let username = server.username { entry["username"] = username }
            if let credential = server.credential { entry["credential"] = credential }
            return entry
        }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: servers), as: UTF8.self)
        return try RTCPeer(command, arguments: ["--ice-servers", json, "--relay-only"])
    }

    func relayedTransport() throws -> (RTCMediaTransport, MediaEvents) {
        transport(iceServers: try issuedICEServers(), options: .init(relayOnly: true, localAddresses: ["127.0.0.1"]))
    }

    func assertOnlyRelayCandidates(_ sdp: String, _ side: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let candidates = try sdp.split(separator: "\r\n").filter { $0.hasPrefix("a=candidate:") }.map { try ICECandidate.parse(String($0.dropFirst(2))) }
        XCTAssertFalse(candidates.isEmpty, "\(side) offers candidates", file: file, line: line)
        XCTAssertEqual(Set(candidates.map(\.type)), [.relay], "\(side) offers relayed candidates only", file: file, line: line)
    }

    func assertRelayedPair(_ transport: RTCMediaTransport, file: StaticString = #filePath, line: UInt = #line) throws {
        let pair = try XCTUnwrap(transport.selectedPair(), "a pair was selected", file: file, line: line)
        XCTAssertEqual(pair.local.type, .relay, "\(pair)", file: file, line: line)
        XCTAssertEqual(pair.remote.type, .relay, "\(pair)", file: file, line: line)
    }

    func testTetherOffersAiortcAnswersRelayOnlyThroughCoturnAndTheSelectedPairIsRelayed() throws {
        let (transport, events) = try relayedTransport()
        let peer = try aiortc("answer")
        transport.perform(.createOffer)
        let offer = try complete(events)
        try assertOnlyRelayCandidates(offer, "Tether")
        try peer.send(["sdp": offer])
        let answer = try XCTUnwrap(peer.record(within: 20) { $0["sdp"] as? String }, peer.errors)
        try assertOnlyRelayCandidates(answer, "aiortc")
        transport.perform(.setRemoteAnswer(sdp: answer))
        try exchangeMessages(transport, events, peer)
        try assertRelayedPair(transport)
        transport.perform(.close)
        try peer.send(["close": true])
        XCTAssertEqual(peer.finish(), 0, peer.errors)
    }

    func testAiortcOffersTetherAnswersRelayOnlyThroughCoturnAndTheSelectedPairIsRelayed() throws {
        let (transport, events) = try relayedTransport()
        let peer = try aiortc("offer")
        let offer = try XCTUnwrap(peer.record(within: 20) { $0["sdp"] as? String }, peer.errors)
        try assertOnlyRelayCandidates(offer, "aiortc")
        transport.perform(.acceptOffer(sdp: offer))
        let answer = try complete(events)
        try assertOnlyRelayCandidates(answer, "Tether")
        try peer.send(["sdp": answer])
        try exchangeMessages(transport, events, peer)
        try assertRelayedPair(transport)
        transport.perform(.close)
        try peer.send(["close": true])
        XCTAssertEqual(peer.finish(), 0, peer.errors)
    }
}

/// What both interop classes share: a Tether transport, its complete description, and the
/// message exchange with aiortc.
class AiortcInteropCase: XCTestCase {
    func transport(iceServers: [ICEServer] = [], options: RTCMediaTransport.Options = .init(localAddresses: ["127.0.0.1"])) -> (RTCMediaTransport, MediaEvents) {
        let transport = RTCMediaTransport(iceServers: iceServers, options: options)
        let events = MediaEvents()
        transport.delegate = events
        return (transport, events)
    }

    /// The description with every gathered candidate in it: aiortc takes no trickled ones.
    func complete(_ events: MediaEvents) throws -> String {
        let sdp = try XCTUnwrap(events.first(within: 10) { if case let .localDescription(sdp) = $0 { sdp } else { nil } })
        XCTAssertNotNil(events.first(within: 10) { if case let .localCandidate(c) = $0, c.isEndOfCandidates { true } else { nil } }, "gathering ends")
        let candidates = events.all.compactMap { if case let .localCandidate(c) = $0, !c.isEndOfCandidates { c.candidate } else { nil } }
        XCTAssertFalse(candidates.isEmpty)
        return sdp + candidates.map { "a=\($0)\r\n" }.joined() + "a=end-of-candidates\r\n"
    }

    func exchangeMessages(_ transport: RTCMediaTransport, _ events: MediaEvents, _ peer: RTCPeer, file: StaticString = #filePath, line: UInt = #line) throws {
        guard events.first(within: 15, { if case .channelOpen = $0 { true } else { nil } }) != nil,
              peer.record(within: 15, { $0["event"] as? String == "open" ? true : nil }) != nil else {
            return XCTFail("the channel did not open on both sides: Tether \(events.summary), aiortc \(peer.summary)", file: file, line: line)
        }
        let small = Array("hello aiortc".utf8), frame = (0..<32_785).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for message in [small, frame] { transport.perform(.send(message)) }
        // aiortc prints what it got and echoes it.
        let seen = peer.records(within: 15, atLeast: 2) { ($0["message"] as? String).flatMap { Data(base64Encoded: $0) }.map(Array.init) }
        XCTAssertTrue(seen == [small, frame], "aiortc received both, whole and in order: \(seen.map(\.count))", file: file, line: line)
        let echoed = events.values(within: 15, atLeast: 2) { if case let .channelMessage(bytes) = $0 { bytes } else { nil } }
        XCTAssertTrue(echoed == [small, frame], "the echoes came back: \(echoed.map(\.count))", file: file, line: line)
        try peer.send(["send": Data("from aiortc".utf8).base64EncodedString()])
        let third = events.values(within: 15, atLeast: 3) { if case let .channelMessage(bytes) = $0 { bytes } else { nil } }
        XCTAssertTrue(third.last == Array("from aiortc".utf8), "aiortc's own message: \(third.map(\.count))", file: file, line: line)
        XCTAssertFalse(events.all.contains(.failed), file: file, line: line)
    }
}

/// What a transport reported, in order; tests wait on it.
final class MediaEvents: WaitableLog<CallMediaEvent>, CallMediaTransportDelegate, @unchecked Sendable {  // the log's lock guards its events
    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) { append(event) }

    /// The events without message payloads, for failure messages.
    var summary: String {
        all.map { event in
            switch event {
            case let .channelMessage(bytes): "message(\(bytes.count) bytes)"
            case .localDescription: "localDescription"
            case let .localCandidate(candidate): candidate.isEndOfCandidates ? "endOfCandidates" : "candidate"
            default: "\(event)"
            }
        }.joined(separator: ", ")
    }
}

/// `Tests/Peers/rtc_peer.py`: JSON lines in and out, killed after 60 s.
final class RTCPeer: @unchecked Sendable {  // `lock` guards `lines`, `pending` and `stderrText`
    private let launched: PythonProcess
    private var process: Process { launched.process }
    private let lock = NSLock()
    private var lines: [[String: Any]] = []
    private var pending = Data()
    private var stderrText = ""

    init(_ command: String, arguments: [String] = []) throws {
        launched = try PythonProcess(script: "rtc_peer.py", arguments: [command] + arguments, timeout: 60)
        launched.output.fileHandleForReading.readabilityHandler = { [weak self] handle in self?.take(handle.availableData) }
        launched.errors.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            self?.lock.withLock { self?.stderrText += text }
        }
    }

    private func take(_ data: Data) {
        lock.withLock {
            pending.append(data)
            while let newline = pending.firstIndex(of: 0x0A) {
                let line = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                if let record = try? JSONSerialization.jsonObject(with: line) as? [String: Any] { lines.append(record) }
            }
        }
    }

    var summary: String { lock.withLock { lines.map { $0.keys.sorted().joined(separator: "+") }.joined(separator: ", ") } + "; " + errors }

    var errors: String { lock.withLock { stderrText + lines.compactMap { $0["error"] as? String }.joined(separator: "; ") } }

    func send(_ record: [String: Any]) throws {
        var data = try JSONSerialization.data(withJSONObject: record)
        data.append(0x0A)
        try launched.input.fileHandleForWriting.write(contentsOf: data)
    }

    func record<T>(within seconds: Double, _ match: ([String: Any]) -> T?) -> T? { records(within: seconds, atLeast: 1, match).first }

    func records<T>(within seconds: Double, atLeast count: Int, _ match: ([String: Any]) -> T?) -> [T] {
        var seen: [T] = []
        _ = Eventually.holds(within: seconds) {
            seen = lock.withLock { lines }.compactMap(match)
            return seen.count >= count
        }
        return seen
    }

    /// Waits for the peer to exit; its status.
    func finish() -> Int32 {
        try? launched.input.fileHandleForWriting.close()
        process.waitUntilExit()
        launched.output.fileHandleForReading.readabilityHandler = nil
        launched.errors.fileHandleForReading.readabilityHandler = nil
        return process.terminationStatus
    }
}
