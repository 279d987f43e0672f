import Foundation
import TetherClient
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// Noise XK between a phone and a Mac through the real relay's splice (client.md §9).
final class SecureChannelTests: RelayTestCase {
    private struct Pair {
        let mac: SecureChannel
        let phone: SecureChannel
    }

    /// A Mac with `macKey` parks; a phone that believes the Mac's key is `believed` joins; both handshake.
    private func connect(macKey: X25519.PrivateKey = X25519.PrivateKey(), phoneKey: X25519.PrivateKey = X25519.PrivateKey(),
                         believed: X25519.PublicKey? = nil, phonePID: String? = nil, pinned: X25519.PublicKey? = nil) async throws -> Pair {
        let pid = "0123456789abcdef"
        let room = RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: macKey.publicKey.rawRepresentation, pairingID: pid))
        let macSocket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        let phoneSocket = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        async let mac = SecureChannel.respond(over: macSocket, staticKey: macKey, pairingID: pid, pinnedPeer: pinned)
        async let phone = SecureChannel.initiate(over: phoneSocket, staticKey: phoneKey, responderStaticKey: believed ?? macKey.publicKey,
                                                 pairingID: phonePID ?? pid)
        return Pair(mac: try await mac, phone: try await phone)
    }

    func testBothSidesReachTheSameHashAndSASAndFramesOfAnySizeCross() async throws {
        let phoneKey = X25519.PrivateKey()
        let pair = try await connect(phoneKey: phoneKey)
        XCTAssertEqual(pair.mac.handshakeHash, pair.phone.handshakeHash)
        XCTAssertEqual(pair.mac.sas, pair.phone.sas)
        XCTAssertEqual(pair.mac.sas.count, 6)
        XCTAssertEqual(pair.mac.remoteStaticKey, phoneKey.publicKey, "the Mac learns the phone's static key")
        let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }
        try pair.phone.send(big)
        try pair.phone.send([])
        try pair.phone.send(Array("hello".utf8))
        let first = try await pair.mac.receive()
        let second = try await pair.mac.receive()
        let third = try await pair.mac.receive()
        XCTAssertEqual(first, big, "a 200,000-byte frame round-trips in chunks")
        XCTAssertEqual(second, [])
        XCTAssertEqual(third, Array("hello".utf8))
        try pair.mac.send(Array("verdict".utf8))
        let back = try await pair.phone.receive()
        XCTAssertEqual(back, Array("verdict".utf8))
        pair.phone.close()
        let end = try await pair.mac.receive()
        XCTAssertNil(end, "the peer left")
    }

    func testASecondReceiveWhileOneWaitsIsRefusedAndTheFirstStillGetsItsFrame() async throws {
        let pair = try await connect()
        let mac = pair.mac
        let waiting = Task { try await mac.receive() }
        // Let the first call reach its wait before the second arrives. Must be a sleep: the
        // channel shows no sign that a receive is waiting other than refusing a second one.
        try await Task.sleep(nanoseconds: 100_000_000)
        do {
            _ = try await mac.receive()
            XCTFail("a second reader is refused")
        } catch {
            XCTAssertEqual(error, .receiveInProgress)
        }
        try pair.phone.send(Array("one".utf8))
        let first = try await waiting.value
        XCTAssertEqual(first, Array("one".utf8), "the waiting call was not disturbed")
        try pair.phone.send(Array("two".utf8))
        let next = try await mac.receive()
        XCTAssertEqual(next, Array("two".utf8), "once it returned, the next call reads on")
    }

    func testAWrongMacKeyOrPairingIDFailsTheHandshake() async throws {
        do {
            _ = try await connect(believed: X25519.PrivateKey().publicKey)
            XCTFail("a phone holding another Mac key")
        } catch let error as SecureChannelError {
            XCTAssertTrue(Self.isHandshakeFailure(error), "\(error)")
        }
        do {
            _ = try await connect(phonePID: "another-pid")
            XCTFail("another prologue")
        } catch let error as SecureChannelError {
            XCTAssertTrue(Self.isHandshakeFailure(error), "\(error)")
        }
    }

    /// One side fails its MAC check; the other sees its socket close.
    private static func isHandshakeFailure(_ error: SecureChannelError) -> Bool {
        if case .handshakeFailed = error { return true }
        return error == .closed
    }

    func testTheMacRefusesAPhoneOtherThanThePinnedOne() async throws {
        do {
            _ = try await connect(pinned: X25519.PrivateKey().publicKey)
            XCTFail("not the pinned phone")
        } catch let error as SecureChannelError {
            XCTAssertTrue(error == .unexpectedPeer || error == .closed, "\(error)")
        }
        let phoneKey = X25519.PrivateKey()
        let pair = try await connect(phoneKey: phoneKey, pinned: phoneKey.publicKey)
        XCTAssertEqual(pair.mac.remoteStaticKey, phoneKey.publicKey)
    }
}
