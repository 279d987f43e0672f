import Foundation
import TetherClient
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// The first pairing and a reconnect (client.md §16) through the real relay, both roles driven by
/// the SDK: park, join, Noise XK, SAS typed on the Mac, verdict, room-secret courier and ack,
/// `/register` after the ack, `hello`; then signed joins with the Mac pinning the phone.
final class PairingFlowTests: RelayTestCase {
    private final class Box<Value>: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    func testFirstPairingThenASignedReconnectWithThePinnedPhone() async throws {
        let loop = self.loop

        let macKey = X25519.PrivateKey(), phoneKey = X25519.PrivateKey()
        let pid = PairingLink.makePairingID(randomBytes: SecureRandom.bytes(8))
        // The link carries an https origin (loopback http links are the CLI's to allow); the room
        // name it yields does not depend on the origin, and the test relay is reached over loopback.
        let link = try PairingLink(transport: .direct(relayOrigin: "https://relay.example"), responderStaticKey: macKey.publicKey.rawRepresentation,
                                   pairingID: pid)
        let parsed = try PairingLink.parse(link.url)
        let room = RelayRoom(origin: relay.origin, name: parsed.roomName)
        let phoneSecret = RoomSecret.generate()
        let macStore = Box<RoomSecret?>(nil)
        // The phone shows its code once its handshake is done; the Mac's user reads it from there.
        // The Mac may finish its side first, so the second attempt waits for the code to be shown.
        let (shownOnPhone, show) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))

        let macSocket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        let phoneSocket = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        let token = try XCTUnwrap(phoneSocket.registrationToken)

        async let macSide: X25519.PublicKey? = {
            let channel = try await SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: pid)
            // The user types the phone's code: a typo first, then the right one.
            try await CompanionSession.confirmOnMac(channel) { attempt in
                guard attempt > 1 else { return "000000" }
                var shown = shownOnPhone.makeAsyncIterator()
                return " \(await shown.next() ?? "") "
            }
            _ = try await CompanionSession.acceptRoomSecret(channel) { macStore.value = $0 }
            try await CompanionSession.helloOnMac(channel)
            return channel.remoteStaticKey
        }()
        async let phoneSide: Void = {
            let channel = try await SecureChannel.initiate(over: phoneSocket, staticKey: phoneKey,
                                                           responderStaticKey: try X25519.PublicKey(rawRepresentation: parsed.responderStaticKey),
                                                           pairingID: parsed.pairingID)
            show.yield(channel.sas)
            show.finish()
            try await CompanionSession.awaitVerdict(channel)
            try await CompanionSession.courierRoomSecret(channel, phoneSecret, requestID: 1)
            // Only after the ack is the verifier registered (§12.4).
            try await RelayCalls(room: room, loop: loop).register(registrationToken: token, verifier: phoneSecret.verifier)
            try await CompanionSession.helloFromPhone(channel, requestID: 2)
        }()
        let pinned = try await macSide
        try await phoneSide
        XCTAssertEqual(pinned, phoneKey.publicKey)
        XCTAssertEqual(macStore.value, phoneSecret, "the Mac holds the phone's room secret")
        phoneSocket.close()
        macSocket.close()

        // Reconnect: both sign; the Mac completes the handshake only with the pinned phone.
        let secret = try XCTUnwrap(macStore.value)
        let macAgain = try await RelayAdmission.join(room, role: .mac, proof: .signed(secret), on: loop)
        let phoneAgain = try await RelayAdmission.join(room, role: .phone, proof: .signed(phoneSecret), on: loop)
        async let macChannel = SecureChannel.respond(over: macAgain, staticKey: macKey, pairingID: pid, pinnedPeer: pinned)
        async let phoneChannel = SecureChannel.initiate(over: phoneAgain, staticKey: phoneKey, responderStaticKey: macKey.publicKey, pairingID: pid)
        let (mac, phone) = try await (macChannel, phoneChannel)
        async let courier: Void = CompanionSession.courierRoomSecret(phone, phoneSecret, requestID: 1)
        let resent = try await CompanionSession.acceptRoomSecret(mac) { _ in }
        try await courier
        XCTAssertEqual(resent, phoneSecret, "re-couriered on every connection")
        try phone.send(Array("a line of chat".utf8))
        let line = try await mac.receive()
        XCTAssertEqual(line, Array("a line of chat".utf8))
    }

    func testThreeWrongCodesVoidThePairingAndThePhoneHearsDeclined() async throws {
        let loop = self.loop

        let macKey = X25519.PrivateKey()
        let pid = "0011223344556677"
        let room = RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: macKey.publicKey.rawRepresentation, pairingID: pid))
        let macSocket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        let phoneSocket = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        let attempts = Box(0)
        async let macSide: Void = {
            let channel = try await SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: pid)
            try await CompanionSession.confirmOnMac(channel) { _ in
                attempts.value += 1
                return "12345"   // not even six digits
            }
        }()
        async let phoneSide: Void = {
            let channel = try await SecureChannel.initiate(over: phoneSocket, staticKey: X25519.PrivateKey(), responderStaticKey: macKey.publicKey, pairingID: pid)
            try await CompanionSession.awaitVerdict(channel)
        }()
        do {
            try await macSide
            XCTFail("three wrong codes")
        } catch let error as CompanionError {
            XCTAssertEqual(error, .wrongCode)
        }
        do {
            try await phoneSide
            XCTFail("declined")
        } catch let error as CompanionError {
            XCTAssertEqual(error, .pairingDeclined)
            XCTAssertEqual(error.description, "The pairing was declined on your Mac. Make sure the code matches and try again.")
        }
        XCTAssertEqual(attempts.value, 3)
    }
}
