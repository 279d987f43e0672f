import Foundation
import Glibc
import TetherCall
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// The SDK's `SignalingClient` against the real `tether signal` binary: registration, signals
/// forwarded unchanged, refusals, presence, a duplicate ID, and reconnecting after a restart.
final class SignalingClientEndToEndTests: XCTestCase {
    var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    /// On port 0 (the port it bound is read from its start line), or on `port` for a restart.
    func server(port: UInt16 = 0, _ environment: [String: String] = [:]) throws -> ServiceProcess {
        try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", String(port)], environment: environment, expecting: "signal: listening on")
    }

    func client(_ server: ServiceProcess, _ identity: CallIdentity = CallIdentity(), reconnects: Bool = true) throws -> (SignalingClient, ClientEvents) {
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true), identity: identity, loop: group.next(),
                                         reconnects: reconnects) { events.append($0) }
        client.start()
        return (client, events)
    }

    func testARegistrationDeliversTheICEServersAndTheirExpiry() throws {
        let server = try self.server(["STUN_URLS": "stun:127.0.0.1:3478"])
        let (client, events) = try client(server)
        defer { client.stop() }
        let registration = try XCTUnwrap(events.first(within: 10) { if case let .registered(r) = $0 { r } else { nil } }, "\(events.all)")
        XCTAssertEqual(registration.id, client.identity.id)
        XCTAssertEqual(registration.iceServers, [ICEServer(urls: ["stun:127.0.0.1:3478"])])
        XCTAssertEqual(Double(registration.iceExpiresAt), Date().timeIntervalSince1970 + 3600, accuracy: 30)
    }

    func testASignalArrivesUnchangedAndAnOfflineRecipientIsRefusedWithItsCallAndKind() throws {
        let server = try self.server()
        let (alice, aliceEvents) = try client(server)
        let (bob, bobEvents) = try client(server)
        defer { alice.stop(); bob.stop() }
        for events in [aliceEvents, bobEvents] { XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } }) }

        let call = CallUUID.random()
        let sent = alice.identity.signal(.channel, to: bob.identity.id, call: call, body: "e30=")
        alice.send(sent)
        let received = try XCTUnwrap(bobEvents.first(within: 10) { if case let .signal(s) = $0 { s } else { nil } })
        XCTAssertEqual(received, sent)
        XCTAssertTrue(IdentityVerification.isAuthentic(received))

        let nobody = CallIdentity().id
        alice.send(alice.identity.signal(.offer, to: nobody, call: call, body: "e30="))
        let refusal = try XCTUnwrap(aliceEvents.first(within: 10) { if case let .signalRefused(r) = $0 { r } else { nil } })
        XCTAssertEqual(refusal.knownCode, .offline)
        XCTAssertEqual(refusal.call, call)
        XCTAssertEqual(refusal.kind, .offer)
    }

    func testPresenceAnswersForEveryIDAskedAndFollowsADisconnect() async throws {
        let server = try self.server()
        let (alice, aliceEvents) = try client(server)
        let (bob, bobEvents) = try client(server)
        defer { alice.stop() }
        for events in [aliceEvents, bobEvents] { XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } }) }
        let nobody = CallIdentity().id
        let online = try await alice.presence([bob.identity.id, nobody]).get()
        XCTAssertEqual(online, [bob.identity.id: true, nobody: false])

        bob.stop()
        XCTAssertNotNil(bobEvents.first(within: 10) { if case .disconnected(_, retryIn: nil) = $0 { true } else { nil } })
        try await eventually("presence is removed once the socket closed", within: 10, poll: 0.05) {
            try await alice.presence([bob.identity.id]).get() == [bob.identity.id: false]
        }
        let refused = await bob.presence([nobody])
        XCTAssertEqual(refused, .failure(.notRegistered))
    }

    func testASecondConnectionWithALiveIDIsRefusedAndTheFirstKeepsItsRegistration() async throws {
        let server = try self.server()
        let identity = CallIdentity()
        let (first, firstEvents) = try client(server, identity)
        defer { first.stop() }
        XCTAssertNotNil(firstEvents.first(within: 10) { if case .registered = $0 { true } else { nil } })

        let (second, secondEvents) = try client(server, identity, reconnects: false)
        let failure = try XCTUnwrap(secondEvents.first(within: 10) { if case let .disconnected(f, retryIn: nil) = $0 { f } else { nil } })
        XCTAssertEqual(failure.code, .duplicateID)
        XCTAssertFalse(failure.isFinal, "a duplicate clears once the other socket is gone, so a reconnecting client tries again")
        XCTAssertEqual(failure.description, "signaling: this ID is already connected from another device or session")
        let secondRegistration = await second.currentRegistration()
        XCTAssertNil(secondRegistration)
        XCTAssertFalse(firstEvents.all.contains { if case .disconnected = $0 { true } else { false } })
    }

    func testAClientRegistersAgainAfterTheServerRestarts() throws {
        var server: ServiceProcess? = try self.server()
        let port = server!.port   // the restart comes back where the client reconnects
        let (client, events) = try client(server!)
        defer { client.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        server?.stop()
        let retry = try XCTUnwrap(events.first(within: 10) { if case let .disconnected(f, retryIn: delay?) = $0 { (f, delay) } else { nil } })
        XCTAssertEqual(retry.0.closeCode, 1001, "SIGTERM closes every socket 1001 shutting_down")
        XCTAssertLessThanOrEqual(retry.1, .seconds(3), "the first retry comes within 3 s")
        server = try self.server(port: port)
        XCTAssertEqual(events.values(within: 15, atLeast: 2) { if case let .registered(r) = $0 { r } else { nil } }.count, 2)
        withExtendedLifetime(server) {}
    }

    func testAnUnreachableServerIsReportedWithoutRetryingWhenReconnectsAreOff() throws {
        let events = ClientEvents()
        let closed = RefusingPort()
        defer { withExtendedLifetime(closed) {} }
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(closed.port)/signal", allowLoopbackWS: true), identity: CallIdentity(), loop: group.next(),
                                         reconnects: false) { events.append($0) }
        client.start()
        let failure = try XCTUnwrap(events.first(within: 10) { if case let .disconnected(f, retryIn: nil) = $0 { f } else { nil } })
        XCTAssertTrue(failure.description.hasPrefix("signaling: cannot reach the server"), failure.description)
    }
}

extension SignalingClientEndToEndTests {
    /// §4: the client pings every 15 s and drops a server that did not answer the previous ping,
    /// then reconnects; a stopped (SIGSTOP) server plays the dead path, a manual clock the time.
    func testAServerThatStopsAnsweringPingsIsDroppedAfterTheNextPingAndRetried() async throws {
        let server = try self.server()
        let pid = server.process.processIdentifier
        defer { ProcessStop.resume(pid) }
        let clock = ManualClock()
        let manual = try EventLoopGroup(count: 1, clock: clock)
        defer { manual.shutdown() }
        let loop = manual.loops[0]
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true),
                                         identity: CallIdentity(), loop: loop) { events.append($0) }
        client.start()
        defer { client.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        func advance(_ seconds: UInt64) async {
            clock.advance(by: .seconds(seconds))
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in loop.execute { loop.runTimers(); done.resume() } }
        }
        await advance(15)   // a ping, answered
        try await Task.sleep(nanoseconds: 300_000_000)   // must be a sleep: the client shows no sign the pong came back
        XCTAssertTrue(ProcessStop.stop(pid), "the server stopped")
        await advance(15)   // the answer came: a new ping, never answered
        XCTAssertFalse(events.all.contains { if case .disconnected = $0 { true } else { false } }, "an answered ping keeps the socket")
        await advance(15)
        let retry = events.first(within: 5) { if case let .disconnected(_, retryIn: delay?) = $0 { delay } else { nil } }
        XCTAssertNotNil(retry, "dropped after the unanswered ping, and tried again")
    }

    /// `tether presence`, as a script runs it: one line per contact in the order given.
    func testTetherPresencePrintsEachContactOnlineOrOfflineInTheOrderGiven() throws {
        let server = try self.server()
        let (alice, events) = try client(server)
        defer { alice.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        let nobody = CallIdentity().id
        let url = "ws://127.0.0.1:\(server.port)/signal"
        let link = ContactLink(id: alice.identity.id, relay: try SignalingEndpoint(url, allowLoopbackWS: true)).url
        let (status, output) = try TetherBinary.run(["presence", nobody.display, link, "--signal", url])
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(output, "\(nobody.canonical) offline\n\(alice.identity.id.canonical) online\n")

        let closed = RefusingPort()
        let (refused, why) = try TetherBinary.run(["presence", nobody.canonical, "--signal", "ws://127.0.0.1:\(closed.port)/signal"])
        withExtendedLifetime(closed) {}
        XCTAssertEqual(refused, 1)
        XCTAssertTrue(why.hasPrefix("tether: presence: signaling: cannot reach the server"), why)
        let (usage, notAKey) = try TetherBinary.run(["presence", "1234", "--signal", url])
        XCTAssertEqual(usage, 2)
        XCTAssertEqual(notAKey.split(separator: "\n").count, 1, notAKey)
    }
}

typealias ClientEvents = WaitableLog<SignalingClient.Event>

extension SignalingClientEndToEndTests {
    /// §3.5: the client's session is ephemeral, without cookies or caching: its upgrade request
    /// carries only the WebSocket handshake's headers, and after a refusal that sets a cookie and
    /// cache headers, the retry carries no `Cookie` and no conditional or cache header either.
    func testTheClientSendsNoCookieOrCacheHeaders() throws {
        let recorder = try RequestRecorder(answer: "HTTP/1.1 503 Service Unavailable\r\nSet-Cookie: session=tether-e2e; Path=/\r\n"
                                               + "Cache-Control: max-age=3600\r\nETag: \"e2e\"\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
                                               + "Content-Type: text/plain\r\nContent-Length: 8\r\nConnection: close\r\n\r\ncapacity")
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(recorder.port)/signal", allowLoopbackWS: true),
                                         identity: CallIdentity(), loop: group.next()) { events.append($0) }
        client.start()
        defer { client.stop() }
        let requests = recorder.requests.values(within: 10, atLeast: 2) { $0 }
        XCTAssertGreaterThanOrEqual(requests.count, 2, "the client tried again after the refusal: \(events.all)")
        for request in requests.prefix(2) {
            let lines = request.split(separator: "\r\n").map(String.init)
            XCTAssertEqual(lines.first, "GET /signal HTTP/1.1")
            let names = Set(lines.dropFirst().compactMap { $0.split(separator: ":", maxSplits: 1).first?.lowercased() })
            XCTAssertEqual(names, ["host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version"], request)
            for name in ["cookie", "cache-control", "if-none-match", "if-modified-since", "pragma", "authorization"] {
                XCTAssertFalse(names.contains(name), "\(name) in \(request)")
            }
            XCTAssertFalse(request.contains("tether-e2e"), request)
        }
    }
}

extension SignalingClientEndToEndTests {
    /// §4: clients answer server pings: a ping from the server, before any message, gets a
    /// masked pong with the same payload.
    func testTheClientAnswersAServerPingWithAPongOfTheSamePayload() throws {
        let server = try RequestRecorder { connection, head in
            let key = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(WebSocketHandshake.accept(forKey: key))\r\n\r\n"
            let ping: [UInt8] = [0x89, 11] + Array("tether-ping".utf8)
            RequestRecorder.send(Array(response.utf8) + ping, to: connection)
            var header = [UInt8](repeating: 0, count: 6)
            guard RequestRecorder.read(&header, from: connection), header[1] & 0x7F < 126 else { return "no frame" }
            var payload = [UInt8](repeating: 0, count: Int(header[1] & 0x7F))
            guard RequestRecorder.read(&payload, from: connection) else { return "no payload" }
            let unmasked = payload.enumerated().map { $0.element ^ header[2 + $0.offset % 4] }
            return "opcode \(header[0] & 0x0F) fin \(header[0] >> 7) masked \(header[1] >> 7) payload \(String(decoding: unmasked, as: UTF8.self))"
        }
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true),
                                         identity: CallIdentity(), loop: group.next(), reconnects: false) { _ in }
        client.start()
        defer { client.stop() }
        XCTAssertEqual(server.requests.first(within: 10) { $0.hasPrefix("opcode") ? $0 : nil }, "opcode 10 fin 1 masked 1 payload tether-ping")
    }
}

/// A loopback TCP listener that records what `serve` makes of each connection (by default the
/// request head, answered with fixed bytes), then closes it.
final class RequestRecorder: @unchecked Sendable {  // `fd` is set once, before the thread starts
    let requests = WaitableLog<String>()
    let port: UInt16
    private let fd: Int32

    static func send(_ bytes: [UInt8], to connection: Int32) { _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) } }

    static func read(_ buffer: inout [UInt8], from connection: Int32) -> Bool {
        var done = 0
        while done < buffer.count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(connection, $0.baseAddress! + done, $0.count - done) }
            guard got > 0 else { return false }
            done += got
        }
        return true
    }

    convenience init(answer: String) throws {
        try self.init { connection, head in
            RequestRecorder.send(Array(answer.utf8), to: connection)
            return head
        }
    }

    init(serve: @escaping @Sendable (_ connection: Int32, _ head: String) -> String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { close(fd); throw Vectors.Failure.notFound("cannot listen on 127.0.0.1") }
        port = UInt16(bigEndian: address.sin_port)
        let requests = requests
        Thread.detachNewThread {
            while true {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { return }
                var head = [UInt8](), byte: UInt8 = 0
                while !head.ends(with: Array("\r\n\r\n".utf8)), head.count < 65_536, Glibc.read(connection, &byte, 1) == 1 { head.append(byte) }
                requests.append(serve(connection, String(decoding: head, as: UTF8.self)))
                close(connection)
            }
        }
    }

    deinit { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

extension SignalingClientEndToEndTests {
    /// §3.4: a contact link's `relay=` is never used by itself (the user confirms an endpoint):
    /// `tether presence` with a link whose relay is another server asks the `--signal` one, and
    /// the link's relay is never contacted.
    func testAContactLinksRelayIsNeverContactedByItself() throws {
        let server = try self.server()
        let elsewhere = try RequestRecorder(answer: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let contact = CallIdentity().id
        let link = ContactLink(id: contact, relay: try SignalingEndpoint("ws://127.0.0.1:\(elsewhere.port)/signal", allowLoopbackWS: true)).url
        let (status, output) = try TetherBinary.run(["presence", link, "--signal", "ws://127.0.0.1:\(server.port)/signal"])
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(output, "\(contact.canonical) offline\n")
        Thread.sleep(forTimeInterval: 0.2)   // must be a sleep: that no request arrives is the check
        XCTAssertEqual(elsewhere.requests.all, [], "the link's relay was contacted")
    }
}
