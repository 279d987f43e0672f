import Foundation
import TetherClient
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding
import TetherDevice

/// The phone endpoint against a Mac that speaks the wire as the shipping iTerm2 Mac does:
/// the phone's requests are byte-identical to client.md §12, `/register` follows the ack, and
/// the established room then admits signed joins only.
final class PhoneEndpointInteropTests: RelayTestCase {
    private final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [EndpointEvent] = []
        func add(_ event: EndpointEvent) { lock.withLock { events.append(event) } }
        var all: [EndpointEvent] { lock.withLock { events } }
    }

    /// A phone endpoint on a fresh state directory, recording its events.
    private func makePhone(pingInterval: Duration = .seconds(15), pongTimeout: Duration = .seconds(10),
                           clock: any DeviceClock = SystemDeviceClock()) throws -> (StateDirectory, Recorder, PhoneEndpoint) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-phone-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        let recorder = Recorder()
        return (state, recorder, PhoneEndpoint(context: EndpointContext(loop: loop, state: state, clock: clock) { recorder.add($0) },
                                               pingInterval: pingInterval, pongTimeout: pongTimeout))
    }

    func testAShippingMacConversationPairsTheEndpointPhone() async throws {
        let (state, recorder, phone) = try makePhone()

        let macKey = X25519.PrivateKey()
        let link = try PairingLink(transport: .direct(relayOrigin: relay.origin), responderStaticKey: macKey.publicKey.rawRepresentation,
                                   pairingID: "00112233aabbccdd", allowLoopbackHTTP: true)
        let room = RelayRoom(origin: relay.origin, name: link.roomName)
        let macSocket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        let running = Task { try await phone.pair(link) }
        defer { running.cancel() }

        let channel = try await SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: link.pairingID)
        // The phone shows its code as its handshake ends, which may be a moment after the Mac's
        // side of it completes: wait for the event rather than race it.
        func shownCodes() -> [String] { recorder.all.compactMap { if case let .showCode(code) = $0 { code } else { nil } } }
        await eventually("the phone shows its code", within: 2) { !shownCodes().isEmpty }
        let shown = shownCodes()
        XCTAssertEqual(shown, [channel.sas], "the phone shows the code both derived")
        XCTAssertEqual(recorder.all.first, .relay(origin: relay.origin, disclosedHost: "127.0.0.1:\(relay.port)"))
        try channel.send(PairingVerdict.accepted.frame)

        let courier = try await channel.receive()
        let text = String(decoding: try XCTUnwrap(courier), as: UTF8.self)
        let secretText = try XCTUnwrap(text.split(separator: "\"").dropFirst(9).first)
        XCTAssertEqual(text, #"{"requestID":1,"payload":{"relayRoomSecret":{"_0":"\#(secretText)"}}}"#)
        let secret = try RoomSecret(bytes: try Base64.decode(String(secretText)))
        XCTAssertEqual(try state.roomSecret(), secret)
        // Not registered before the ack: a signed join still finds a pairing room.
        XCTAssertNil(state.registeredRoom)
        try channel.send(Array(#"{"requestID":1,"payload":{"relayRoomSecretStored":{}}}"#.utf8))

        let hello = try await channel.receive()
        XCTAssertEqual(hello, Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11}}}"#.utf8))
        XCTAssertEqual(state.registeredRoom, room.name.hex, "registered after the ack, before hello")
        XCTAssertTrue(recorder.all.contains(.codeWithdrawn), "the code goes once the verdict came")
        try channel.send(Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11,"wantsNotificationPermission":true}}}"#.utf8))
        await eventually("the phone reports connected", within: 2) { recorder.all.contains(.connected) }

        phone.send(Array("line from the phone".utf8))
        let line = try await channel.receive()
        XCTAssertEqual(line, Array("line from the phone".utf8))

        // The room is established with the phone's verifier: a park is refused, a signed join admitted.
        do {
            _ = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
            XCTFail("an established room wants a signature")
        } catch {
            XCTAssertEqual(error, .refused("signature required"))
        }
        let signed = try await RelayAdmission.join(room, role: .mac, proof: .signed(secret), on: loop)
        signed.close()
    }

    func testTheCodeIsWithdrawnWhenTheConnectionDropsAndNothingIsStored() async throws {
        let (state, recorder, phone) = try makePhone()
        let macKey = X25519.PrivateKey()
        let link = try PairingLink(transport: .direct(relayOrigin: relay.origin), responderStaticKey: macKey.publicKey.rawRepresentation,
                                   pairingID: "ffeeddccbbaa0099", allowLoopbackHTTP: true)
        let macSocket = try await RelayAdmission.join(RelayRoom(origin: relay.origin, name: link.roomName), role: .mac, proof: .park, on: loop)
        let running = Task { try await phone.pair(link) }
        _ = try await SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: link.pairingID)
        macSocket.close()
        do {
            try await running.value
            XCTFail("no pairing without a verdict")
        } catch let error as CompanionError {
            XCTAssertEqual(error, .channel(.closed))
        }
        let events = recorder.all
        let shownAt = try XCTUnwrap(events.firstIndex { if case .showCode = $0 { true } else { false } })
        XCTAssertEqual(events.last, .codeWithdrawn, "blanked the moment the connection dropped")
        XCTAssertGreaterThan(events.count - 1, shownAt)
        XCTAssertNil(state.pairedRole)
        XCTAssertNil(try state.roomSecret())
    }

    /// A Mac played by hand: parked, it accepts `phone`'s pairing, stores the room secret and
    /// answers the phone's hello (request ids 1 and 2); the channel is then at the session.
    private func pairedThroughHello(_ phone: PhoneEndpoint, pairingID: String) async throws -> (SecureChannel, Task<Void, any Error>) {
        let macKey = X25519.PrivateKey()
        let link = try PairingLink(transport: .direct(relayOrigin: relay.origin), responderStaticKey: macKey.publicKey.rawRepresentation,
                                   pairingID: pairingID, allowLoopbackHTTP: true)
        let macSocket = try await RelayAdmission.join(RelayRoom(origin: relay.origin, name: link.roomName), role: .mac, proof: .park, on: loop)
        let running = Task { try await phone.pair(link) }
        let channel = try await SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: link.pairingID)
        try channel.send(PairingVerdict.accepted.frame)
        _ = try await channel.receive()
        try channel.send(Array(#"{"requestID":1,"payload":{"relayRoomSecretStored":{}}}"#.utf8))
        _ = try await channel.receive()
        try channel.send(Array(#"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11}}}"#.utf8))
        return (channel, running)
    }

    func testThePhonePingsTheMacAndDropsASessionWhosePeerNeverAnswers() async throws {
        let (_, recorder, phone) = try makePhone(pingInterval: .milliseconds(200), pongTimeout: .milliseconds(300))
        let (channel, running) = try await pairedThroughHello(phone, pairingID: "0a0b0c0d0e0f0001")
        defer { running.cancel() }

        // Answered pings keep the session; ids go on from 3.
        for id in 3...4 {
            let ping = try await channel.receive()
            XCTAssertEqual(ping, Array(#"{"requestID":\#(id),"payload":{"ping":{}}}"#.utf8))
            try channel.send(Array(#"{"requestID":\#(id),"payload":{"pong":{}}}"#.utf8))
        }
        // An unanswered one ends it: the phone closes and will run a fresh handshake.
        let unanswered = try await channel.receive()
        XCTAssertEqual(unanswered, Array(#"{"requestID":5,"payload":{"ping":{}}}"#.utf8))
        let end = try await channel.receive()
        XCTAssertNil(end, "the phone closed the session")
        XCTAssertFalse(recorder.all.contains { if case .message = $0 { true } else { false } }, "pongs never reach the application")
    }

    /// The same rule at its real intervals (a ping every 15 s, 10 s for its pong) on a clock the
    /// test moves: 25 seconds of the phone's time pass in no wall time.
    func testAnUnansweredPingEndsTheSessionWhenItsPongTimeoutPassesOnTheEndpointsClock() async throws {
        let clock = ManualDeviceClock()
        let (_, recorder, phone) = try makePhone(clock: clock)
        let (channel, running) = try await pairedThroughHello(phone, pairingID: "0a0b0c0d0e0f0003")
        defer { running.cancel() }

        // Once the session is up its set-up deadlines are over: the only sleeper is the pinger.
        await eventually("the session is up", within: 10, poll: 0.005) { recorder.all.contains { if case .connected = $0 { true } else { false } } }
        try await untilAsleep(clock)
        clock.advance(by: .seconds(15))
        let ping = try await channel.receive()
        XCTAssertEqual(ping, Array(#"{"requestID":3,"payload":{"ping":{}}}"#.utf8))
        try await untilAsleep(clock)
        clock.advance(by: .seconds(9))
        try await untilAsleep(clock)
        clock.advance(by: .seconds(1))
        let end = try await channel.receive()
        XCTAssertNil(end, "the phone closed the session once the pong was 10 s overdue")
    }

    /// Waits until exactly one task (the phone's pinger) sleeps on `clock`.
    private func untilAsleep(_ clock: ManualDeviceClock, file: StaticString = #filePath, line: UInt = #line) async throws {
        await eventually("the pinger sleeping on the clock", within: 10, poll: 0.005, file: file, line: line) { clock.sleeping == 1 }
    }

    /// client.md §12.6, push.md §3.3: a configured `pushStatus` follows `hello` (no request id,
    /// base64 token and secret), and a changed one is sent at once on the live session.
    func testAConfiguredPushStatusFollowsHelloAndEachChangeIsSent() async throws {
        let (_, _, phone) = try makePhone()
        let token = [UInt8](repeating: 0x5A, count: 32)
        let secret = [UInt8](repeating: 0x07, count: 32)
        phone.pushStatus = PushStatus(authorization: .authorized, token: token, relaySecret: secret, sandbox: true)
        let (channel, running) = try await pairedThroughHello(phone, pairingID: "0a0b0c0d0e0f0002")
        defer { running.cancel() }
        let status = try await channel.receive()
        XCTAssertEqual(status, Array(#"{"payload":{"pushStatus":{"authorization":"authorized","token":"\#(Base64.encode(token))","relaySecret":"\#(Base64.encode(secret))","sandbox":true}}}"#.utf8))
        phone.pushStatus = PushStatus(authorization: .denied, sandbox: false)
        let changed = try await channel.receive()
        XCTAssertEqual(changed, Array(#"{"payload":{"pushStatus":{"authorization":"denied","sandbox":false}}}"#.utf8))
    }

    /// A pushStatus changed while the session is being set up, before it is current, still
    /// reaches the Mac: it is either the session's first pushStatus or follows the old one (it
    /// was lost under load when the old value went out before the session took changes; this
    /// test cannot force that window, the greeting closes it by construction).
    func testAPushStatusChangedWhileTheSessionStartsIsNotLost() async throws {
        let (_, _, phone) = try makePhone()
        phone.pushStatus = PushStatus(authorization: .authorized, token: [UInt8](repeating: 0x5A, count: 32),
                                      relaySecret: [UInt8](repeating: 0x07, count: 32), sandbox: true)
        let (channel, running) = try await pairedThroughHello(phone, pairingID: "0a0b0c0d0e0f0003")
        defer { running.cancel() }
        phone.pushStatus = PushStatus(authorization: .denied, sandbox: false)
        let denied = Array(#"{"payload":{"pushStatus":{"authorization":"denied","sandbox":false}}}"#.utf8)
        let first = try await channel.receive()
        if first != denied {
            XCTAssertEqual(first.map { String(decoding: $0, as: UTF8.self).contains(#""authorization":"authorized""#) }, true)
            let second = try await channel.receive()
            XCTAssertEqual(second, denied, "the change follows the status the session started with")
        }
    }
}
