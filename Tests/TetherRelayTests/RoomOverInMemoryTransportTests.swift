import Dispatch
import Foundation
import TetherNet
@testable import TetherRelay
import TetherStore
import TetherWire
import XCTest

/// A room driven without a socket: the relay's own room table adopts the server ends of
/// `InMemoryTransport` pairs, and WebSocket clients on the other ends admit a mac and a phone
/// and splice a frame — the whole admission path (gate place, storage lane, splice) in-process.
final class RoomOverInMemoryTransportTests: XCTestCase {
    func testAMacAndAPhoneAreAdmittedAndSplicedWithoutASocket() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.attestationRequired = false
        configuration.origin = "http://relay.test"
        let store = InMemoryRoomStore()
        let relay = RelayServer(configuration: configuration, group: group, store: store) { _ in }
        let loop = group.loops[0]
        let room = RoomName(header: String(repeating: "f", count: 64))!
        let mac = Peer(), phone = Peer()

        for peer in [mac, phone] {
            guard case let .success(arrival) = relay.gate.admitSocketPlace(ip: "in-memory") else { return XCTFail("gate refused") }
            try loop.submitAndWait {
                let (server, client) = InMemoryTransport.pair(loop)
                relay.rooms[0].attach(server, leftover: [], room: room, server: relay, ip: "in-memory",
                                      id: SocketID(arrival), connectedAt: relay.clock.monotonicMs())
                peer.socket = WebSocketConnection(connection: client, role: .client, delegate: peer)
            }
        }
        XCTAssertEqual(relay.gate.openSockets, 2)

        func admit(_ peer: Peer, _ role: RelayRole) -> String? {
            loop.execute { peer.socket?.send(text: Array(Hello(role: role).json.utf8)) }
            guard peer.next()?.hasPrefix(#"{"nonce":""#) == true else { return nil }
            loop.execute { peer.socket?.send(text: Array("{}".utf8)) }
            return peer.next()
        }
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
        for _ in 0..<200 where relay.gate.openSockets > 0 { usleep(10_000) }
        XCTAssertEqual(relay.gate.openSockets, 0, "both places given back")
    }
}

/// A WebSocket client end that queues what it receives for the test thread.
private final class Peer: WebSocketDelegate, @unchecked Sendable {   // `socket` only on the loop; `received` under its lock
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
