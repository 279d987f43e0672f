import Dispatch
import Foundation
@testable import TetherNet
@testable import TetherRelay
import TetherStore
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// A room driven without a socket: the relay's own room table adopts the server ends of
/// `InMemoryTransport` pairs, and WebSocket clients on the other ends admit a mac and a phone
/// and splice a frame — the whole admission path (gate place, storage lane, splice) in-process.
final class RoomOverInMemoryTransportTests: XCTestCase {
    func testAMacAndAPhoneAreAdmittedAndSplicedWithoutASocket() throws {
        let group = try EventLoopGroup(count: 1)
        let store = InMemoryRoomStore()
        let relay = Self.openRelay(group, store) { _ in }
        // The loop stops before the relay goes: a room's task that runs late must still find it.
        defer { withExtendedLifetime(relay) { group.shutdown() } }
        let loop = group.loops[0]
        let room = RoomName(header: String(repeating: "f", count: 64))!
        let mac = InMemoryPeer(), phone = InMemoryPeer()
        try Self.attach(mac, to: room, relay)
        try Self.attach(phone, to: room, relay)
        XCTAssertEqual(relay.gate.openSockets, 2)
        func admit(_ peer: InMemoryPeer, _ role: RelayRole) -> String? { Self.admit(peer, role, relay) }
        XCTAssertEqual(admit(mac, .mac), #"{"ok":true}"#)
        XCTAssertEqual(admit(phone, .phone)?.hasPrefix(#"{"ok":true,"registrationToken":""#), true)
        // The token's write was queued on the room's store lane before the Result left (so a
        // `/register`, which runs on that lane, always finds it); wait for the lane to get there.
        relay.storage.drain()
        XCTAssertEqual(store.room(room)?.registrationTokens.count, 1, "the token was written on the room's store lane")

        loop.execute { mac.socket?.send(binary: [1, 2, 3]) }
        XCTAssertEqual(phone.next(), "binary:010203")
        loop.execute { phone.socket?.close(code: 1000) }
        XCTAssertEqual(mac.next(), "close:1001:peer gone", "§3.13 over the in-memory pair as over TCP")
        // The mac's side ends once its close echo reaches the relay.
        eventually("both places given back (open sockets \(relay.gate.openSockets))", within: 2) { relay.gate.openSockets == 0 }
    }

    /// The store stops answering (a database that is down): a new admission is closed 1011
    /// `internal error` — never a verdict on its credentials — while the pair already spliced
    /// goes on; `/readyz` names the storage, one line says so, and when the store answers again
    /// (the 1 s shard-map read) the relay admits as before, without a restart.
    func testAStoreThatStopsAnsweringRefusesNewAdmissionsWhileSplicedPairsGoOnAndRecovers() throws {
        let group = try EventLoopGroup(count: 1)
        let store = InMemoryRoomStore()
        let lines = LogLines()
        let relay = Self.openRelay(group, store) { lines.append($0) }
        // The loop stops before the relay goes: a room's task that runs late must still find it.
        defer { withExtendedLifetime(relay) { group.shutdown() } }
        let exits = LogLines()
        relay.onFaultBudgetExceeded = { exits.append("exit") }
        let loop = group.loops[0]
        let room = RoomName(header: String(repeating: "f", count: 64))!
        let other = RoomName(header: String(repeating: "e", count: 64))!

        func attach(_ peer: InMemoryPeer, to room: RoomName) throws { try Self.attach(peer, to: room, relay) }
        func admit(_ peer: InMemoryPeer, _ role: RelayRole) -> String? { Self.admit(peer, role, relay) }

        let mac = InMemoryPeer(), phone = InMemoryPeer()
        try attach(mac, to: room)
        try attach(phone, to: room)
        XCTAssertEqual(admit(mac, .mac), #"{"ok":true}"#)
        XCTAssertEqual(admit(phone, .phone)?.hasPrefix(#"{"ok":true,"registrationToken":""#), true)
        relay.storage.drain()

        store.setFailure(StoreError("database is down"))
        let refused = InMemoryPeer()
        try attach(refused, to: other)
        XCTAssertEqual(admit(refused, .mac), "close:1011:internal error")
        let alsoRefused = InMemoryPeer()
        try attach(alsoRefused, to: other)
        XCTAssertEqual(admit(alsoRefused, .mac), "close:1011:internal error")

        loop.execute { mac.socket?.send(binary: [1, 2, 3]) }
        XCTAssertEqual(phone.next(), "binary:010203", "the spliced pair never needed the store")
        loop.execute { phone.socket?.send(binary: [4]) }
        XCTAssertEqual(mac.next(), "binary:04")

        XCTAssertEqual(relay.readiness.failing(), ["storage"])
        XCTAssertEqual(lines.all.filter { $0.hasPrefix("relay: storage") },
                       ["relay: storage unavailable: database is down; refusing what needs it (1011/500 internal error), splicing the rest"],
                       "one line for the outage, not one per refused call")
        let metrics = relay.metrics.render(occupancy: .init(), socketsLive: 0)
        XCTAssertTrue(metrics.contains("relay_storage_errors_total 2\n"), metrics)
        XCTAssertTrue(metrics.contains("relay_storage_available 0\n"), metrics)
        XCTAssertTrue(metrics.contains("relay_process_exceptions_total 0\n"), "an outage is not a process fault")
        XCTAssertEqual(exits.all, [])

        store.setFailure(nil)
        relay.adoptStoredMap(from: store)   // the 1 s shard-map read, run now
        XCTAssertEqual(relay.readiness.failing(), ["storage"], "a read that answers is no proof: a full disk answers reads")
        relay.probeStorage(store)           // the write probe that follows it
        XCTAssertEqual(relay.readiness.failing(), [])
        XCTAssertEqual(lines.all.last, "relay: storage available again (2 calls failed meanwhile)")
        let admitted = InMemoryPeer()
        try attach(admitted, to: other)
        XCTAssertEqual(admit(admitted, .mac), #"{"ok":true}"#)
    }
}

extension RoomOverInMemoryTransportTests {
    /// relay.md §2.2 step 9: a room endpoint whose store fails is answered 500 `internal error`
    /// and counted in `relay_http_errors_total` (as well as in the requests that passed the gate).
    func testAStoreFailureAnswered500IsCountedAsAnHTTPError() throws {
        let group = try EventLoopGroup(count: 1)
        let store = InMemoryRoomStore()
        let relay = Self.openRelay(group, store) { _ in }
        // The loop stops before the relay goes: a room's task that runs late must still find it.
        defer { withExtendedLifetime(relay) { group.shutdown() } }
        let head = HTTPRequestHead(method: "POST", target: "/attest/challenge", headers: HTTPHeaders([("x-relay-room", String(repeating: "f", count: 64))]))
        XCTAssertFalse(relay.metrics.render(occupancy: .init(), socketsLive: 0).contains("relay_http_errors_total"), "hidden at zero")
        store.setFailure(StoreError("database is down"))
        let answers = LogLines()
        let answered = DispatchSemaphore(value: 0)
        group.loops[0].execute {
            XCTAssertNil(relay.screen(head, peer: nil), "past the gate")
            relay.respond(to: HTTPServerRequest(head: head, body: [], peer: nil, loopIndex: 0)) { response in
                answers.append("\(response.status) \(String(decoding: response.body, as: UTF8.self))")
                answered.signal()
            }
        }
        XCTAssertEqual(answered.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(answers.all, [#"500 {"ok":false,"error":"internal error"}"#])
        let metrics = relay.metrics.render(occupancy: .init(), socketsLive: 0)
        XCTAssertTrue(metrics.contains("relay_http_errors_total 1\n"), metrics)
        XCTAssertTrue(metrics.contains("relay_http_requests_total 1\n"), metrics)
    }

    /// An open-mode relay on `group` over `store`, logging to `log`.
    fileprivate static func openRelay(_ group: EventLoopGroup, _ store: InMemoryRoomStore, log: @escaping @Sendable (String) -> Void) -> RelayServer {
        var configuration = RelayConfiguration()
        configuration.attestationRequired = false
        configuration.origin = "http://relay.test"
        return RelayServer(configuration: configuration, group: group, store: store, log: log)
    }

    /// Gives `peer` a socket in `room` of loop 0's table through an in-memory pair.
    static func attach(_ peer: InMemoryPeer, to room: RoomName, _ relay: RelayServer) throws {
        let loop = relay.group.loops[0]
        guard case let .success(arrival) = relay.gate.admitSocketPlace(ip: "in-memory") else { return XCTFail("gate refused") }
        try loop.submitAndWait {
            let (server, client) = InMemoryTransport.pair(loop)
            relay.rooms[0].attach(server, leftover: [], room: room, server: relay, ip: "in-memory",
                                  id: SocketID(arrival), connectedAt: relay.clock.monotonic())
            peer.socket = WebSocketConnection(connection: client, role: .client, delegate: peer)
        }
    }

    /// A Hello and a Proof (an open-mode `{}` unless given); the relay's answer to the Proof (or its close).
    static func admit(_ peer: InMemoryPeer, _ role: RelayRole, _ relay: RelayServer, proof: String = "{}") -> String? {
        let loop = relay.group.loops[0]
        loop.execute { peer.socket?.send(text: Array(Hello(role: role).json.utf8)) }
        guard peer.next()?.hasPrefix(#"{"nonce":""#) == true else { return nil }
        loop.execute { peer.socket?.send(text: Array(proof.utf8)) }
        return peer.next()
    }
}

private final class LogLines: @unchecked Sendable {   // every access under `lock`
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// A WebSocket client end that queues what it receives for the test thread.
final class InMemoryPeer: WebSocketDelegate, @unchecked Sendable {   // `socket` only on the loop; `received` under its lock
    var socket: WebSocketConnection?
    private let lock = NSLock()
    private var received: [String] = []
    private let arrived = DispatchSemaphore(value: 0)

    private func push(_ event: String) {
        lock.withLock { received.append(event) }
        arrived.signal()
    }

    /// The next event, waiting up to 5 s.
    func next() -> String? {
        guard arrived.wait(timeout: .now() + 5) == .success else { return nil }
        return lock.withLock { received.removeFirst() }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) { push(String(decoding: text, as: UTF8.self)) }
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) { push("binary:" + Hex.encode(data)) }
    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) { push("close:\(code):\(reason)") }
}
