import TetherCrypto
import TetherRelay
import TetherStore
import TetherWire
import XCTest
import TetherEncoding

final class RoomEndpointsTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "c", count: 64))!
    private let origin = "https://relay.example"
    private var store: InMemoryRoomStore!
    private var n: UInt8 = 0

    override func setUp() {
        store = InMemoryRoomStore()
        n = 0
    }

    private func call(_ path: String, _ body: String = "", attested: Bool = false, now: UInt64 = 1_000, in target: RoomName? = nil) -> RoomEndpoints.Outcome {
        RoomEndpoints(origin: origin, attestationRequired: attested)
            .handle(path: path, body: Array(body.utf8), room: target ?? room, store: store, now: .milliseconds(now)) { count in
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
        for length in [3, 31, 33] {
            let short = call("/register", #"{"verifier":"\#(Base64.encode([UInt8](repeating: 1, count: length)))"}"#)
            XCTAssertEqual(short.status, 400, "a \(length)-byte verifier")
            XCTAssertEqual(error(short), "bad verifier")
        }
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

/// Rules of relay.md §4 checked one by one.
extension RoomEndpointsTests {
    private var verifier: String { Base64.encode([UInt8](repeating: 9, count: 32)) }

    /// Status and error of an answer.
    private func answer(_ outcome: RoomEndpoints.Outcome) -> [AnyHashable] { [outcome.status, error(outcome) ?? "-"] }

    private func live(now: UInt64 = 1_000) throws -> Int { try store.liveChallenges(in: room, now: now) }

    private func establish() throws -> RoomSecret {
        let secret = RoomSecret.generate()
        XCTAssertTrue(try store.setVerifier(Base64.encode(secret.verifier), of: room, now: 0))
        return secret
    }

    private func signedDelete(_ secret: RoomSecret, _ c: String) throws -> String {
        let transcript = DeleteTranscript(challenge: try Base64.decode(c), room: room, origin: origin)
        return #"{"challenge":"\#(c)","signature":"\#(Base64.encode(secret.joinSigningKey().signature(for: transcript.bytes)))"}"#
    }

    /// §4 ("not a string"): a body that is not an object, or a field that is not a string, is a
    /// missing field, at every endpoint.
    func testEveryNonObjectBodyAndNonStringFieldReadsAsMissing() throws {
        for body in ["5", #""s""#, "true", "false", "null", "[]"] {
            let attest = call("/attest", body, attested: true)
            XCTAssertEqual(answer(attest), [400, "missing fields"], body)
            let register = call("/register", body)
            XCTAssertEqual(answer(register), [400, "missing verifier"], body)
        }
        XCTAssertEqual(error(call("/register", #"{"verifier":5}"#)), "missing verifier")
        XCTAssertEqual(error(call("/attest", #"{"challenge":1,"attestationObject":"y"}"#, attested: true)), "missing fields")
        XCTAssertEqual(error(call("/attest", #"{"challenge":"c","attestationObject":["y"]}"#, attested: true)), "missing fields")
        _ = try establish()
        for body in ["5", #""s""#, "true", "false", "null", "[]", #"{"challenge":1,"signature":"x"}"#, #"{"challenge":"c","signature":{}}"#] {
            let delete = call("/delete", body)
            XCTAssertEqual(answer(delete), [403, "signature required"], body)
        }
    }

    /// §4.2 (Tether): null, numbers and arrays are one case, answered 400.
    func testAttestAnswersMissingFieldsWith400ForNullNumbersAndArrays() {
        for body in ["null", "5", "[]"] {
            let outcome = call("/attest", body, attested: true)
            XCTAssertEqual(outcome.status, 400, body)
            XCTAssertEqual(outcome.json, #"{"ok":false,"error":"missing fields"}"#, body)
        }
    }

    /// §4.2 step 1: open mode refuses before the body is read.
    func testAttestInOpenModeIsDisabledEvenForABodyThatIsNotJSON() {
        for body in ["nope", "", "{"] {
            let outcome = call("/attest", body)
            XCTAssertEqual(outcome.status, 400, body)
            XCTAssertEqual(error(outcome), "attestation disabled", body)
        }
    }

    /// §4.1: one single-use pool: a challenge spent by a failure at one endpoint is gone for all.
    func testAChallengeSpentAtOneEndpointIsBadChallengeAtTheOthers() throws {
        try store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 400_000, attestKeyID: "kid", attestPublicKey: "pk"), in: room)
        let c1 = challenge()
        XCTAssertEqual(error(call("/attest", #"{"challenge":"\#(c1)","attestationObject":"y"}"#, attested: true)), "attestation rejected")
        XCTAssertEqual(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"K","challenge":"\#(c1)","assertion":"a"}"#, attested: true)),
                       "bad challenge", "spent at /attest, presented at /register")
        let c2 = challenge()
        XCTAssertEqual(error(call("/attest", #"{"challenge":"\#(c2)","attestationObject":"y"}"#, attested: true)), "attestation rejected")
        let secret = try establish()
        let delete = call("/delete", try signedDelete(secret, c2))
        XCTAssertEqual(answer(delete), [403, "bad challenge"], "spent at /attest, presented (well signed) at /delete")
        let c3 = challenge()
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c3)","signature":"AAAA"}"#)), "bad signature")
        let attest = call("/attest", #"{"challenge":"\#(c3)","attestationObject":"y"}"#, attested: true)
        XCTAssertEqual(answer(attest), [403, "bad challenge"], "spent at /delete, presented at /attest")
        XCTAssertNotNil(store.room(room)?.verifier, "nothing was deleted")
    }

    /// §4.3 step 5: tokens are per room.
    func testATokenFromAnotherRoomIsBadToken() throws {
        let other = RoomName(header: String(repeating: "e", count: 64))!
        try store.putRegistrationToken("KB", RegistrationTokenRecord(expiresAt: 400_000), in: other)
        let outcome = call("/register", #"{"verifier":"\#(verifier)","registrationToken":"KB"}"#)
        XCTAssertEqual(answer(outcome), [403, "bad token"])
        XCTAssertNotNil(try store.registrationToken("KB", in: other, now: 1_000), "room B's token stays")
        XCTAssertNil(try store.verifier(of: room))
        XCTAssertEqual(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"KB"}"#, in: other).status, 200, "and works in its own room")
    }

    /// §4.4 step 1: the body is parsed first, in a pairing room as in an established one; no
    /// challenge is touched.
    func testDeleteAnswersBadJSONBeforeNotEstablished() throws {
        _ = challenge()
        let pairing = call("/delete", "{")
        XCTAssertEqual(answer(pairing), [400, "bad json"], "before not established")
        _ = try establish()
        let established = call("/delete", "{")
        XCTAssertEqual(answer(established), [400, "bad json"])
        XCTAssertEqual(try live(), 1, "the live challenge stays live")
    }

    /// §4.4: the same in attestation mode; a null body is a missing signature (Tether), not 500.
    func testDeleteWorksInAttestedModeAndANullBodyIsSignatureRequired() throws {
        let secret = try establish()
        for attested in [false, true] {
            let outcome = call("/delete", "null", attested: attested)
            XCTAssertEqual(answer(outcome), [403, "signature required"], "attested: \(attested)")
        }
        let outcome = call("/delete", try signedDelete(secret, challenge()), attested: true)
        XCTAssertEqual(outcome.status, 200)
        XCTAssertTrue(outcome.tearDown)
        XCTAssertNil(store.room(room))
    }

    /// §4.6: an attested /register spends its challenge only at the assertion step.
    func testARegisterRefusedBeforeTheAssertionStepLeavesItsChallengeLive() throws {
        try store.putRegistrationToken("U", RegistrationTokenRecord(expiresAt: 400_000), in: room)
        try store.putRegistrationToken("A", RegistrationTokenRecord(expiresAt: 400_000, attestKeyID: "kid", attestPublicKey: "pk"), in: room)
        let c = challenge()
        for (token, assertion, refusal) in [("nope", #","assertion":"a""#, "bad token"), ("U", #","assertion":"a""#, "token not attested"),
                                            ("A", "", "assertion required")] {
            let outcome = call("/register", #"{"verifier":"\#(verifier)","registrationToken":"\#(token)","challenge":"\#(c)"\#(assertion)}"#, attested: true)
            XCTAssertEqual(answer(outcome), [403, refusal])
            XCTAssertEqual(try live(), 1, "still live after \(refusal)")
        }
        XCTAssertTrue(error(call("/register", #"{"verifier":"\#(verifier)","registrationToken":"A","challenge":"\#(c)","assertion":"a"}"#, attested: true))?
            .hasPrefix("assertion rejected: ") ?? false)
        XCTAssertEqual(try live(), 0, "spent by the assertion step")
    }

    /// §4.6: /delete spends its challenge only after the established and field checks.
    func testADeleteRefusedBeforeTheChallengeStepLeavesItLive() throws {
        let c = challenge()
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c)","signature":"x"}"#)), "not established")
        XCTAssertEqual(try live(), 1)
        _ = try establish()
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c)"}"#)), "signature required")
        XCTAssertEqual(try live(), 1)
        XCTAssertEqual(error(call("/delete", #"{"challenge":"\#(c)","signature":"x"}"#)), "bad signature")
        XCTAssertEqual(try live(), 0, "spent by the challenge step, though the signature failed")
    }
}
