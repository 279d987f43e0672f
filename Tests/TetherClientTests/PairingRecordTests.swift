import Foundation
import TetherClient
import TetherCrypto
import TetherWire
import XCTest
import TetherEncoding
import TetherDevice

/// What a device keeps between runs: round trips, damage refused, wipe keeps the identity.
final class PairingRecordTests: XCTestCase {
    private func directory() throws -> StateDirectory {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tether-record-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return try StateDirectory(url)
    }

    func testTheMacPairingRoundTripsAndNamesTheRole() throws {
        let state = try directory()
        XCTAssertNil(state.pairedRole)
        let phoneKey = X25519.PrivateKey().publicKey
        let pairing = MacPairing(transport: .resolved(resolverURL: "https://resolver.example/shardmap.json"), pairingID: "0123456789abcdef",
                                 phoneStaticKey: phoneKey)
        try state.storeMacPairing(pairing)
        XCTAssertEqual(try state.macPairing(), pairing)
        XCTAssertEqual(state.pairedRole, .mac)
    }

    func testThePhoneKeepsTheLinkInTheReferenceStoredForm() throws {
        let state = try directory()
        let link = try PairingLink(transport: .direct(relayOrigin: "http://127.0.0.1:8080"), responderStaticKey: [UInt8](repeating: 7, count: 32),
                                   pairingID: "p1", allowLoopbackHTTP: true)
        try state.storePhonePairing(link)
        XCTAssertEqual(try state.phonePairing(), link)
        let stored = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(XCTUnwrap(state.read("paired-code")))) as? [String: String])
        XCTAssertEqual(stored, ["responderStaticPublicKey": Base64.encode([UInt8](repeating: 7, count: 32)), "pairingID": "p1",
                                "relayOrigin": "http://127.0.0.1:8080"])
        XCTAssertEqual(state.pairedRole, .phone)
    }

    func testDamagedRecordsAreErrorsNotSilentlyReplaced() throws {
        let state = try directory()
        try state.write("mac-pairing", Array("{not json".utf8))
        XCTAssertThrowsError(try state.macPairing()) { XCTAssertEqual($0 as? StateDirectory.Failure, .corrupt("mac-pairing")) }
        try state.write("relay-room-secret", [1, 2, 3])
        XCTAssertThrowsError(try state.roomSecret()) { XCTAssertEqual($0 as? StateDirectory.Failure, .corrupt("relay-room-secret")) }
        XCTAssertEqual(state.read("relay-room-secret"), [1, 2, 3], "left for the user to inspect")
    }

    func testWipeForgetsThePairingButKeepsTheDeviceKey() throws {
        let state = try directory()
        let key = try state.staticKey()
        try state.storeRoomSecret(RoomSecret.generate())
        try state.storeMacPairing(MacPairing(transport: .direct(relayOrigin: "https://r.example"), pairingID: "p", phoneStaticKey: X25519.PrivateKey().publicKey))
        state.wipePairing()
        XCTAssertNil(try state.roomSecret())
        XCTAssertNil(try state.macPairing())
        XCTAssertNil(state.pairedRole)
        XCTAssertEqual(try state.staticKey().publicKey, key.publicKey)
    }

    func testReResolveRetriesOnceAtOnceThenBacksOff() {
        var backoff = ReconnectBackoff()
        XCTAssertEqual(backoff.nextAfterReResolve { 1 }, .zero)
        XCTAssertEqual(backoff.nextAfterReResolve { 1 }, .seconds(4), "attempt 2's bound")
        backoff.reset()
        XCTAssertEqual(backoff.nextAfterReResolve { 1 }, .zero)
    }
}
