import TetherCrypto
import TetherRelay
import TetherStore
import TetherWire
import XCTest

final class RoomEndpointsTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "c", count: 64))!
    private let origin = "https://relay.example"
    private var store: InMemoryRoomStore!
    private var n: UInt8 = 0

    override func setUp() {
        store = InMemoryRoomStore()
        n = 0
    }

    private func call(_ path: String, _ body: String = "", attested: Bool = false, now: UInt64 = 1_000) -> RoomEndpoints.Outcome {
        RoomEndpoints(origin: origin, attestationRequired: attested)
            .handle(path: path, body: Array(body.utf8), room: room, store: store, now: now) { count in
                n &+= 1
                return [UInt8](repeating: n, count: count)
            }
    }

    private func error(_ outcome: RoomEndpoints.Outcome) -> String? {
        guard case let .object(fields)? = JSONValue.parse(Array(outcome.json.utf8)), case let .string(e)? = fields["error"] else { return nil }
        return e
    }

    private func challenge(now: UInt64 = 1_000) -> String {
        let outcome = call("/attest/challenge", now: now)
        guard case let .object(fields)? = JSONValue.parse(Array(outcome.json.utf8)), case let .string(c)? = fields["challenge"] else { return "" }
        return c
    }

    /// A store that cannot answer: every endpoint says 500 `internal error` (§2.2 step 9) rather
    /// than "not established" or "bad token", which clients would act on; nothing is reported
    /// done, and the store's text stays out of the body.
    func testEveryEndpointAnswersInternalErrorWhenTheStoreCannotAnswer() {
        store.setFailure(StoreError("room database: disk I/O error"))
        for path in ["/attest/challenge", "/attest", "/register", "/delete"] {
            let outcome = call(path, #"{"verifier":"\#(Base64.encode([UInt8](repeating: 1, count: 32)))","registrationToken":"t","challenge":"c","signature":"s","attestationObject":"AA=="}"#, attested: true)
            XCTAssertEqual(outcome.status, 500, path)
            XCTAssertEqual(error(outcome), "internal error", path)
            XCTAssertEqual(outcome.storageFailure, StoreError("room database: disk I/O error"), path)
            XCTAssertFalse(outcome.tearDown, path)
        }
        store.setFailure(nil)
        XCTAssertEqual(call("/attest/challenge").status, 200, "and answers again once the store does")
    }

    func testChallengesAreCappedAtSixteenLiveAndExpireAfterFiveMinutes() {
        for _ in 0..<16 { XCTAssertEqual(call("/attest/challenge").status, 200) }
        let seventeenth = call("/attest/challenge")
        XCTAssertEqual(seventeenth.status, 429)
        XCTAssertEqual(error(seventeenth), "too many outstanding challenges")
        XCTAssertEqual(call("/attest/challenge", now: 1_000 + 300_000).status, 429, "valid while expiresAt ≥ now")
        XCTAssertEqual(call("/attest/challenge", now: 1_000 + 300_001).status, 200, "expired ones are pruned")
        XCTAssertEqual(challenge().count, 44)
    }

    func testAttestIsDisabledInOpenModeAndRefusedUntilAppAttestLands() {
        XCTAssertEqual(error(call("/attest", #"{"challenge":"x"}"#)), "attestation disabled")
        XCTAssertEqual(error(call("/attest", "nope", attested: true)), "bad json")
        XCTAssertEqual(error(call("/attest", "null", attested: true)), "missing fields")
        XCTAssertEqual(error(call("/attest", #"{"challenge":"x","attestationObject":"y"}"#, attested: true)), "bad challenge")
        let c = challenge()
        let refused = call("/attest", #"{"challenge":"\#(c)","attestationObject":"y"}"#, attested: true)
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(error(refused), "attestation rejected")
        XCTAssertEqual(error(call("/attest", #"{"challenge":"\#(c)","attestationObject":"y"}"#, attested: true)), "bad challenge", "consumed")
    }

    func testRegisterChecksInOrderAndConsumesTheTokenOnlyOnSuccess() throws {
        let verifier = Base64.encode(RoomSecret.generate().verifier)
        try store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 400_000), in: room)
        XCTAssertEqual(error(call("/register", "{")), "bad json")
        XCTAssertEqual(error(call("/register", "null")), "missing verifier")
        XCTAssertEqual(error(call("/register", #"{"verifier":"AAAA"}"#)), "bad verifier")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)"}"#)), "token required")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"other"}"#)), "bad token")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K"}"#, now: 400_001)), "bad token", "expired")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K"}"#, attested: true)), "token not attested")
        XCTAssertEqual(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K"}"#).status, 200)
        XCTAssertEqual(try store.verifier(of: room), verifier)
        XCTAssertEqual(store.room(room)?.lastActivity, 1_000)
        XCTAssertNil(try store.registrationToken("K", in: room, now: 1_000), "consumed on success")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K"}"#)), "already registered")
    }

    func testAttestedRegisterNeedsAnAssertionOverAFreshChallenge() throws {
        let verifier = Base64.encode(RoomSecret.generate().verifier)
        try store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 400_000, attestKeyID: "kid", attestPublicKey: "pk"), in: room)
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K"}"#, attested: true)), "assertion required")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K","challenge":"x","assertion":"a"}"#, attested: true)),
                       "bad challenge")
        let c = challenge()
        let outcome = call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K","challenge":"\#(c)","assertion":"a"}"#, attested: true)
        XCTAssertEqual(outcome.status, 403)
        XCTAssertTrue(error(outcome)?.hasPrefix("assertion rejected: ") ?? false)
        XCTAssertNotNil(try store.registrationToken("K", in: room, now: 1_000), "a failed register keeps the token")
    }

    func testDeleteNeedsTheRoomsSignatureAndConsumesTheChallengeEvenWhenItFails() throws {
        XCTAssertEqual(error(call("/delete", "{}")), "not established")
        let secret = RoomSecret.generate()
        try store.setVerifier(Base64.encode(secret.verifier), of: room, now: 0)
        XCTAssertEqual(error(call("/delete", "[]")), "signature required")
        let c1 = challenge()
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c1)","signature":"AAAA"}"#)), "bad signature")
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c1)","signature":"AAAA"}"#)), "bad challenge", "consumed by the failure")
        let c2 = challenge()
        // A join signature over the same challenge is not a delete signature.
        let join = JoinTranscript(role: .mac, nonce: try Base64.decode(c2), room: room, origin: origin)
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c2)","signature":"\#(Base64.encode(secret.joinSigningKey().signature(for: join.bytes)))"}"#)),
                       "bad signature")
        let c3 = challenge()
        let delete = DeleteTranscript(challenge: try Base64.decode(c3), room: room, origin: origin)
        let outcome = call("/delete", #"{"challenge":"\#(c3)","signature":"\#(Base64.encode(secret.joinSigningKey().signature(for: delete.bytes)))"}"#)
        XCTAssertEqual(outcome.status, 200)
        XCTAssertTrue(outcome.tearDown)
        XCTAssertNil(store.room(room), "all keys deleted")
    }
}
