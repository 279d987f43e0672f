import Foundation
import TetherClient
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding
import TetherDevice

/// The Mac endpoint against a phone that speaks the wire as the shipping iTerm2 app does,
/// message by message (client.md §11–§12): the verdict, the courier, hello, then application
/// envelopes the Mac must answer or drop, and the farewell.
final class MacEndpointInteropTests: RelayTestCase {
    private final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [EndpointEvent] = []
        func add(_ event: EndpointEvent) { lock.withLock { events.append(event) } }
        var all: [EndpointEvent] { lock.withLock { events } }

        func wait<T>(_ what: String, _ match: (EndpointEvent) -> T?) async throws -> T {
            guard let found = await Eventually.poll(within: 10, every: 0.02, { self.all.lazy.compactMap(match).first }).0 else {
                throw NSError(domain: "no \(what)", code: 1)
            }
            return found
        }
    }

    private final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var code: String?
        func set(_ value: String) { lock.withLock { code = value } }
        func get() async -> String? {
            await Eventually.poll(within: 10, every: 0.02, { self.lock.withLock { self.code } }).0
        }
    }

    func testAShippingPhoneConversationPairsAndItsControlEnvelopesAreAnswered() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-mac-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        let recorder = Recorder(), code = Box()
        let mac = MacEndpoint(context: EndpointContext(loop: loop, state: state) { recorder.add($0) },
                              transport: .direct(relayOrigin: relay.origin)) { _ in await code.get() }
        let running = Task { try await mac.run() }
        defer { running.cancel() }

        let link = try await recorder.wait("link") { if case let .pairingLink(link) = $0 { link } else { nil } }
        XCTAssertEqual(link.transport, .direct(relayOrigin: relay.origin))
        let room = RelayRoom(origin: relay.origin, name: link.roomName)
        let socket = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        let phoneKey = X25519.PrivateKey()
        let channel = try await SecureChannel.initiate(over: socket, staticKey: phoneKey,
                                                       responderStaticKey: try X25519.PublicKey(rawRepresentation: link.responderStaticKey),
                                                       pairingID: link.pairingID)
        code.set(channel.sas)
        let received1 = try await channel.receive()
        XCTAssertEqual(received1, Array(#"{"pairing":"accepted"}"#.utf8), "the verdict is the first frame, exact bytes")

        let secret = RoomSecret.generate()
        try channel.send(Array(#"{"requestID":1,"payload":{"relayRoomSecret":{"_0":"\#(Base64.encode(secret.bytes))"}}}"#.utf8))
        let received2 = try await channel.receive()
        XCTAssertEqual(received2, Array(#"{"requestID":1,"payload":{"relayRoomSecretStored":{}}}"#.utf8))
        XCTAssertEqual(try state.roomSecret(), secret, "stored before the ack")
        XCTAssertEqual(try state.macPairing()?.phoneStaticKey, phoneKey.publicKey, "the phone's key is pinned")

        try channel.send(Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11}}}"#.utf8))
        let received3 = try await channel.receive()
        XCTAssertEqual(received3,
                       Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11,"wantsNotificationPermission":false}}}"#.utf8))
        _ = try await recorder.wait("session") { $0 == .connected ? true : nil }

        // Application envelopes: a ping is answered, an unknown request gets a correlated error,
        // an event without a request id is dropped, a chat line goes to the application.
        try channel.send(Array(#"{"payload":{"pushStatus":{"authorization":"denied","sandbox":false}}}"#.utf8))
        try channel.send(Array(#"{"requestID":3,"payload":{"ping":{}}}"#.utf8))
        let received4 = try await channel.receive()
        XCTAssertEqual(received4, Array(#"{"requestID":3,"payload":{"pong":{}}}"#.utf8))
        try channel.send(Array(#"{"requestID":4,"payload":{"listChats":{}}}"#.utf8))
        let received5 = try await channel.receive()
        XCTAssertEqual(received5,
                       Array(#"{"requestID":4,"payload":{"error":{"_0":{"code":"unsupported","message":"not supported by this Mac"}}}}"#.utf8))
        try channel.send(Array("a chat line".utf8))
        let line = try await recorder.wait("chat line") { if case let .message(frame) = $0 { frame } else { nil } }
        XCTAssertEqual(line, Array("a chat line".utf8))
        XCTAssertEqual(recorder.all.filter { if case .message = $0 { true } else { false } }.count, 1, "envelopes never reach the application")

        mac.send(Array("from the mac".utf8))
        let received6 = try await channel.receive()
        XCTAssertEqual(received6, Array("from the mac".utf8))

        // The farewell ends the pairing on the Mac.
        try channel.send(Array(#"{"payload":{"unpairing":{}}}"#.utf8))
        do {
            try await running.value
            XCTFail("the Mac keeps running after unpairing")
        } catch let error as CompanionError {
            XCTAssertEqual(error, .unpairedByPeer)
        }
        XCTAssertNil(state.pairedRole)
        XCTAssertNil(try state.roomSecret())
    }

    /// A Mac endpoint paired with a phone played by the test, up to the session (courier, hello).
    private func pairedWithAShippingPhone() async throws -> (MacEndpoint, SecureChannel, Task<Void, any Error>) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-mac-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        let recorder = Recorder(), code = Box()
        let mac = MacEndpoint(context: EndpointContext(loop: loop, state: state) { recorder.add($0) },
                              transport: .direct(relayOrigin: relay.origin)) { _ in await code.get() }
        let running = Task { try await mac.run() }
        let link = try await recorder.wait("link") { if case let .pairingLink(link) = $0 { link } else { nil } }
        let socket = try await RelayAdmission.join(RelayRoom(origin: relay.origin, name: link.roomName), role: .phone, proof: .park, on: loop)
        let channel = try await SecureChannel.initiate(over: socket, staticKey: X25519.PrivateKey(),
                                                       responderStaticKey: try X25519.PublicKey(rawRepresentation: link.responderStaticKey),
                                                       pairingID: link.pairingID)
        code.set(channel.sas)
        _ = try await channel.receive()
        try channel.send(CompanionEnvelope(requestID: 1, .relayRoomSecret(RoomSecret.generate().bytes)).frame)
        _ = try await channel.receive()
        try channel.send(Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11}}}"#.utf8))
        _ = try await channel.receive()
        _ = try await recorder.wait("session") { $0 == .connected ? true : nil }
        return (mac, channel, running)
    }

    private func awaitPushStatus(_ mac: MacEndpoint, _ match: (PushStatus) -> Bool) async throws -> PushStatus {
        guard let status = await Eventually.poll(within: 5, { mac.pushStatus.flatMap { match($0) ? $0 : nil } }).0 else {
            throw NSError(domain: "no matching pushStatus", code: 1)
        }
        return status
    }

    /// push.md §3.3, client.md §12.6: the phone's `pushStatus` (base64 token and secret) gives
    /// the Mac the lowercase-hex token and secret of its Profile I pushes; the last one is kept,
    /// and a secret that is not 32 bytes yields no credentials.
    func testAPushStatusHandsTheMacTheRelayCredentialsAsHex() async throws {
        let (mac, channel, running) = try await pairedWithAShippingPhone()
        defer { running.cancel() }
        XCTAssertNil(mac.pushStatus)
        let token = (0..<32).map { UInt8($0) }
        let secret = [UInt8](repeating: 0xAB, count: 32)
        try channel.send(Array(#"{"payload":{"pushStatus":{"authorization":"authorized","token":"\#(Base64.encode(token))","relaySecret":"\#(Base64.encode(secret))","sandbox":true}}}"#.utf8))
        let status = try await awaitPushStatus(mac) { $0.token != nil }
        XCTAssertEqual(status, PushStatus(authorization: .authorized, token: token, relaySecret: secret, sandbox: true))
        let credentials = try XCTUnwrap(status.relayCredentials)
        XCTAssertEqual(credentials.token, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        XCTAssertEqual(credentials.secret, String(repeating: "ab", count: 32))
        // A secret of 31 bytes: kept as sent, but no push could authenticate with it.
        try channel.send(Array(#"{"payload":{"pushStatus":{"authorization":"authorized","token":"\#(Base64.encode(token))","relaySecret":"\#(Base64.encode([UInt8](repeating: 1, count: 31)))","sandbox":false}}}"#.utf8))
        let short = try await awaitPushStatus(mac) { !$0.sandbox }
        XCTAssertNil(short.relayCredentials)
        // Without a token (permission denied): none either. A malformed one is dropped.
        try channel.send(Array(#"{"payload":{"pushStatus":{"authorization":"maybe","sandbox":true}}}"#.utf8))
        try channel.send(Array(#"{"payload":{"pushStatus":{"authorization":"denied","sandbox":true}}}"#.utf8))
        let denied = try await awaitPushStatus(mac) { $0.authorization == .denied }
        XCTAssertEqual(denied, PushStatus(authorization: .denied, sandbox: true))
        XCTAssertNil(denied.relayCredentials)
        // The session goes on: an envelope, not an application message.
        try channel.send(Array(#"{"requestID":3,"payload":{"ping":{}}}"#.utf8))
        let pong = try await channel.receive()
        XCTAssertEqual(pong, Array(#"{"requestID":3,"payload":{"pong":{}}}"#.utf8))
    }
}
