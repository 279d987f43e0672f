import Foundation
import TetherAttest
import TetherCrypto
import TetherRelay
import TetherStore
import TetherTestSupport
import TetherWire
import XCTest

/// `/register` under attestation (relay.md §4.3 step 6) with real App Attest objects from the
/// independent Python fixture: the counter must grow per key in the room.
final class AttestedRegisterTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "d", count: 64))!
    private let origin = "https://relay.example"
    private let appID = "TEAMID.com.example.companion"

    private func fixture(_ request: [String: Any]) throws -> [String: Any] {
        let text = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        let result = try PythonPeer.run(script: "appattest_fixture.py", arguments: [text])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    func testAReplayedOrLowerCounterIsStaleAndSpendsTheChallengeButNotTheToken() throws {
        let root = try fixture(["op": "root"])
        let store = InMemoryRoomStore()
        var n: UInt8 = 0
        let endpoints = RoomEndpoints(origin: origin, attestationRequired: true,
                                      verifier: try AppAttestVerifier(appID: appID, environment: .production, rootPEM: root["root_pem"] as? String))
        func call(_ path: String, _ body: [String: Any] = [:]) throws -> (Int, [String: Any]) {
            let outcome = endpoints.handle(path: path, body: Array(try JSONSerialization.data(withJSONObject: body)), room: room, store: store,
                                           now: UInt64(Date().timeIntervalSince1970 * 1000)) { count in
                n &+= 1
                return [UInt8](repeating: n, count: count)
            }
            return (outcome.status, try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(outcome.json.utf8)) as? [String: Any]))
        }
        func challenge() throws -> String { try XCTUnwrap(try call("/attest/challenge").1["challenge"] as? String) }

        let first = try challenge()
        let attested = try fixture(["op": "attest", "root_pem": root["root_pem"]!, "root_key_pem": root["root_key_pem"]!, "app_id": appID,
                                    "challenge_b64": first, "origin": origin, "variant": "good"])
        let (status, body) = try call("/attest", ["challenge": first, "attestationObject": attested["attestation_b64"]!])
        XCTAssertEqual(status, 200)
        let ticket = try XCTUnwrap(body["ticket"] as? String)
        let record = try XCTUnwrap(store.consumeTicket(ticket, in: room, now: 0))
        XCTAssertEqual(record.keyID, attested["key_id_b64"] as? String)
        XCTAssertEqual(record.publicKey, attested["public_key_b64"] as? String)
        // The phone admitted by that ticket holds this token.
        try store.putRegistrationToken("T", RegistrationTokenRecord(expiresAt: .max, attestKeyID: record.keyID, attestPublicKey: record.publicKey), in: room)
        try store.setAssertionCounter(5, for: record.keyID, in: RoomKey(room))   // an earlier assertion of this key

        func register(counter: Int) throws -> (Int, String?) {
            let c = try challenge()
            let assertion = try fixture(["op": "assert", "leaf_key_pem": attested["leaf_key_pem"]!, "app_id": appID, "challenge_b64": c,
                                         "origin": origin, "counter": counter, "variant": "good"])
            let (status, body) = try call("/register", ["registrationToken": "T", "verifier": Base64.encode([UInt8](repeating: 1, count: 32)),
                                                        "challenge": c, "assertion": assertion["assertion_b64"]!])
            if status != 200 { XCTAssertNotNil(try store.registrationToken("T", in: room, now: 0), "a failure does not spend the token") }
            XCTAssertEqual(try store.liveChallenges(in: room, now: 0), 0, "the challenge is spent either way")
            return (status, body["error"] as? String)
        }
        XCTAssertEqual(try register(counter: 5).1, "stale assertion", "a replayed counter")
        XCTAssertEqual(try register(counter: 4).1, "stale assertion")
        XCTAssertNil(try store.verifier(of: room), "still pairing")
        XCTAssertEqual(try register(counter: 6).0, 200)
        XCTAssertEqual(try store.assertionCounter(for: record.keyID, in: RoomKey(room)), 6)
        XCTAssertNotNil(try store.verifier(of: room))
    }
}
