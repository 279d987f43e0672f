import Foundation
import TetherAttest
import TetherCrypto
import TetherRelay
import TetherStore
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

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
                                           now: .milliseconds(UInt64(Date().timeIntervalSince1970 * 1000))) { count in
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

/// §4.2 and §4.3 under a configured App Attest verifier (the fixture's test root), rule by rule.
extension AttestedRegisterTests {
    /// Endpoints trusting the fixture's root over one in-memory store, called at one wall time.
    private final class Harness {
        let store = InMemoryRoomStore()
        let endpoints: RoomEndpoints
        let room: RoomName
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        private var n: UInt8 = 0

        init(room: RoomName, endpoints: RoomEndpoints) {
            self.room = room
            self.endpoints = endpoints
        }

        func call(_ path: String, _ body: [String: Any] = [:]) throws -> RoomEndpoints.Outcome {
            endpoints.handle(path: path, body: Array(try JSONSerialization.data(withJSONObject: body)), room: room, store: store, now: .milliseconds(now)) { count in
                self.n &+= 1
                return [UInt8](repeating: self.n, count: count)
            }
        }

        func json(_ outcome: RoomEndpoints.Outcome) throws -> [String: Any] {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(outcome.json.utf8)) as? [String: Any])
        }

        func challenge() throws -> String { try XCTUnwrap(try json(try call("/attest/challenge"))["challenge"] as? String) }
    }

    private func harness() throws -> (Harness, [String: Any]) {
        let root = try fixture(["op": "root"])
        let verifier = try AppAttestVerifier(appID: appID, environment: .production, rootPEM: root["root_pem"] as? String)
        return (Harness(room: room, endpoints: RoomEndpoints(origin: origin, attestationRequired: true, verifier: verifier)), root)
    }

    /// A good attestation over a fresh challenge: the ticket and the fixture's answer.
    private func attest(_ h: Harness, _ root: [String: Any]) throws -> (String, [String: Any]) {
        let c = try h.challenge()
        let attested = try fixture(["op": "attest", "root_pem": root["root_pem"]!, "root_key_pem": root["root_key_pem"]!, "app_id": appID,
                                    "challenge_b64": c, "origin": origin, "variant": "good"])
        let outcome = try h.call("/attest", ["challenge": c, "attestationObject": attested["attestation_b64"]!])
        XCTAssertEqual(outcome.status, 200, outcome.json)
        return (try XCTUnwrap(try h.json(outcome)["ticket"] as? String), attested)
    }

    /// §4.2 step 7: an attestationObject that is not base64 fails like any bad attestation: 403
    /// `attestation rejected`, the detail only for the log, and the challenge spent (step 5).
    func testAnAttestationObjectThatIsNotBase64IsRejectedAndSpendsTheChallenge() throws {
        let (h, _) = try harness()
        let c = try h.challenge()
        let outcome = try h.call("/attest", ["challenge": c, "attestationObject": "!!!"])
        XCTAssertEqual(outcome.status, 403)
        XCTAssertEqual(outcome.json, #"{"ok":false,"error":"attestation rejected"}"#, "no detail on the wire")
        XCTAssertEqual(outcome.diagnostic, "attestationObject is not base64")
        XCTAssertEqual(try h.store.liveChallenges(in: room, now: h.now), 0, "the challenge is spent")
        XCTAssertEqual(try h.json(try h.call("/attest", ["challenge": c, "attestationObject": "AAAA"]))["error"] as? String, "bad challenge")
    }

    /// §4.2 step 8.2: the ticket lives 300 000 ms from the attestation and pins the attested key
    /// as b64std: a 32-byte key id and a 65-byte uncompressed P-256 point.
    func testATicketIsValidUntilExactlyFiveMinutesAfterTheAttestation() throws {
        let (h, root) = try harness()
        let (ticket, attested) = try attest(h, root)
        let record = try XCTUnwrap(h.store.room(room)?.tickets[ticket])
        XCTAssertEqual(record.expiresAt, h.now + 300_000)
        XCTAssertEqual(record.keyID, attested["key_id_b64"] as? String)
        XCTAssertEqual(try Base64.decode(record.keyID).count, 32)
        let publicKey = try Base64.decode(record.publicKey)
        XCTAssertEqual(publicKey.count, 65)
        XCTAssertEqual(publicKey.first, 0x04)
        XCTAssertEqual(Base64.encode(publicKey), record.publicKey, "standard base64, padded")
        XCTAssertNil(try h.store.consumeTicket(ticket, in: RoomKey(room), now: h.now + 300_001), "expired a millisecond later")
        try h.store.putTicket(ticket, record, in: room)
        XCTAssertEqual(try h.store.consumeTicket(ticket, in: RoomKey(room), now: h.now + 300_000), record, "valid at exactly five minutes")
    }

    /// §4.3: the first assertion seen for a key is accepted whatever its counter, even 0.
    func testTheFirstAssertionForAKeyMayCarryCounterZero() throws {
        let (h, root) = try harness()
        let (ticket, attested) = try attest(h, root)
        let record = try XCTUnwrap(try h.store.consumeTicket(ticket, in: RoomKey(room), now: h.now))
        try h.store.putRegistrationToken("T", RegistrationTokenRecord(expiresAt: .max, attestKeyID: record.keyID, attestPublicKey: record.publicKey), in: room)
        XCTAssertNil(try h.store.assertionCounter(for: record.keyID, in: RoomKey(room)), "no assertion seen for this key yet")
        let c = try h.challenge()
        let assertion = try fixture(["op": "assert", "leaf_key_pem": attested["leaf_key_pem"]!, "app_id": appID, "challenge_b64": c,
                                     "origin": origin, "counter": 0, "variant": "good"])
        let outcome = try h.call("/register", ["registrationToken": "T", "verifier": Base64.encode([UInt8](repeating: 1, count: 32)),
                                               "challenge": c, "assertion": assertion["assertion_b64"]!])
        XCTAssertEqual(outcome.status, 200, outcome.json)
        XCTAssertEqual(try h.store.assertionCounter(for: record.keyID, in: RoomKey(room)), 0)
        XCTAssertNotNil(try h.store.verifier(of: room))
    }
}
