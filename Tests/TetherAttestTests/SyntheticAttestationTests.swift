import Foundation
import TetherAttest
import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// Attestations and assertions built by an independent Python fixture (pyca/cryptography) under
/// a throwaway root (relay.md §5.4): one accepted of each, then one per failure.
final class SyntheticAttestationTests: XCTestCase {
    private static let appID = "TEAMID.com.example.companion"
    private static let origin = "https://relay.example"
    private let challenge = Base64.encode([UInt8](repeating: 7, count: 32))
    private var root: [String: Any] = [:]

    private func fixture(_ request: [String: Any]) throws -> [String: Any] {
        let text = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        let result = try PythonPeer.run(script: "appattest_fixture.py", arguments: [text])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    override func setUpWithError() throws {
        root = try fixture(["op": "root"])
    }

    private func verifier(_ environment: AppAttestVerifier.Environment = .production) throws -> AppAttestVerifier {
        try AppAttestVerifier(appID: Self.appID, environment: environment, rootPEM: try XCTUnwrap(root["root_pem"] as? String))
    }

    private var clientDataHash: [UInt8] { AttestClientData.hash(challenge: (try? Base64.decode(challenge)) ?? [], origin: Self.origin) }
    private var now: Int64 { Int64(Date().timeIntervalSince1970) }

    private func attestation(_ variant: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        try fixture(["op": "attest", "root_pem": root["root_pem"]!, "root_key_pem": root["root_key_pem"]!, "app_id": Self.appID,
                     "challenge_b64": challenge, "origin": Self.origin, "variant": variant].merging(extra) { $1 })
    }

    private func object(_ value: [String: Any], _ field: String) throws -> [UInt8] {
        try Base64.decode(try XCTUnwrap(value[field] as? String))
    }

    private func rejection(_ variant: String, environment: AppAttestVerifier.Environment = .production,
                           mutate: ([UInt8]) -> [UInt8] = { $0 }) throws -> String? {
        let made = try attestation(variant)
        do {
            _ = try verifier(environment).verifyAttestation(mutate(try object(made, "attestation_b64")), clientDataHash: clientDataHash, atUnixTime: now)
            return nil
        } catch { return (error as? AppAttestError)?.reason ?? "\(error)" }
    }

    /// The reason `object` is refused, or nil if it verifies.
    private func reason(of object: [UInt8]) throws -> String? {
        do {
            _ = try verifier().verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: now)
            return nil
        } catch { return (error as? AppAttestError)?.reason ?? "\(error)" }
    }

    private var good: [UInt8]?

    /// A good attestation's CBOR map (one per test) with `change` applied to it, re-encoded.
    private func edited(_ change: (inout [String: CBOR]) -> Void) throws -> [UInt8] {
        if good == nil { good = try object(try attestation("good"), "attestation_b64") }
        let decoded = try CBORDecoder(profile: .appAttest).decode(try XCTUnwrap(good))
        guard case let .map(entries) = decoded else { XCTFail("not a map"); return [] }
        var fields: [String: CBOR] = [:]
        for entry in entries { fields[try XCTUnwrap(entry.key.textValue)] = entry.value }
        change(&fields)
        let order = ["fmt", "attStmt", "authData"] + fields.keys.filter { !["fmt", "attStmt", "authData"].contains($0) }.sorted()
        return CBOR.map(order.compactMap { key in fields[key].map { .init(key: .text(key), value: $0) } }).encoded
    }

    /// The attestation statement `{x5c, receipt}` with `x5c` (and `receipt`) replaced; nil drops the field.
    private static func statement(_ x5c: CBOR?, receipt: CBOR? = .bytes([0])) -> CBOR {
        .map([x5c.map { .init(key: .text("x5c"), value: $0) }, receipt.map { .init(key: .text("receipt"), value: $0) }].compactMap { $0 })
    }

    private static func chain(of fields: [String: CBOR]) -> [CBOR] { fields["attStmt"]?["x5c"]?.arrayValue ?? [] }

    func testAnAttestationWithoutAStatementOrByteAuthDataIsBadlyShaped() throws {
        XCTAssertEqual(try reason(of: try edited { $0["attStmt"] = nil }), "bad attestation shape", "no attStmt")
        XCTAssertEqual(try reason(of: try edited { $0["authData"] = nil }), "bad attestation shape", "no authData")
        XCTAssertEqual(try reason(of: try edited { $0["authData"] = .text(String(repeating: "a", count: 87)) }), "bad attestation shape",
                       "authData as a text string")
        XCTAssertEqual(try reason(of: try edited { $0["authData"] = .array([.bytes([UInt8](repeating: 0, count: 87))]) }),
                       "bad attestation shape", "authData as an array")
        XCTAssertNil(try reason(of: try edited { _ in }), "the unedited re-encoding verifies")
    }

    func testAMissingShortOrMistypedCertificateChainIsRefused() throws {
        let chainError = "missing or malformed certificate chain"
        XCTAssertEqual(try reason(of: try edited { $0["attStmt"] = Self.statement(nil) }), chainError, "no x5c")
        XCTAssertEqual(try reason(of: try edited { $0["attStmt"] = Self.statement(Self.chain(of: $0)[0]) }), chainError,
                       "x5c a byte string, not an array")
        XCTAssertEqual(try reason(of: try edited { $0["attStmt"] = Self.statement(.array([Self.chain(of: $0)[0]])) }), chainError,
                       "only the leaf")
        XCTAssertEqual(try reason(of: try edited { $0["attStmt"] = Self.statement(.array([])) }), chainError, "an empty chain")
        XCTAssertEqual(try reason(of: try edited {
            $0["attStmt"] = Self.statement(.array([Self.chain(of: $0)[0], .text("intermediate")]))
        }), chainError, "a text entry")
        XCTAssertEqual(try reason(of: try edited {
            $0["attStmt"] = Self.statement(.array([.unsigned(1), Self.chain(of: $0)[1]]))
        }), chainError, "an integer leaf")
        XCTAssertNil(try reason(of: try edited {
            let chain = Self.chain(of: $0)
            $0["attStmt"] = Self.statement(.array(chain + [.text("ignored")]))
        }), "a third entry is ignored, whatever it is")
        XCTAssertNil(try reason(of: try edited { $0["attStmt"] = Self.statement(.array(Self.chain(of: $0)), receipt: nil) }),
                     "no receipt")
    }

    func testAChainCertificateThatIsNotX509FailsToParse() throws {
        let notDER = CBOR.bytes([0x30, 0x82, 0x01])
        let leaf = try reason(of: try edited { $0["attStmt"] = Self.statement(.array([notDER, Self.chain(of: $0)[1]])) })
        XCTAssertEqual(leaf?.hasPrefix("certificate parse failed: "), true, leaf ?? "accepted")
        let intermediate = try reason(of: try edited { $0["attStmt"] = Self.statement(.array([Self.chain(of: $0)[0], notDER])) })
        XCTAssertEqual(intermediate?.hasPrefix("certificate parse failed: "), true, intermediate ?? "accepted")
        let empty = try reason(of: try edited { $0["attStmt"] = Self.statement(.array([Self.chain(of: $0)[0], .bytes([])])) })
        XCTAssertEqual(empty?.hasPrefix("certificate parse failed: "), true, empty ?? "accepted")
    }

    func testAuthDataShorterThan37BytesIsTooShort() throws {
        // The leaf's nonce is over the short authData, so every check before §5.1 step 10 passes.
        XCTAssertEqual(try rejection("short_auth_data"), "authData too short")
        let short = try attestation("short_auth_data", ["auth_data_length": 37])
        let past = try reason(of: try object(short, "attestation_b64"))
        XCTAssertEqual(past?.hasPrefix("AAGUID/environment mismatch: got \"\""), true, "37 bytes pass to the AAGUID check: \(past ?? "accepted")")
    }

    func testTheAuthDataFlagsAreNotChecked() throws {
        let keys = try [0x40, 0x00, 0xFF].map { flags in
            let made = try attestation("good", ["flags": flags])
            let key = try verifier().verifyAttestation(try object(made, "attestation_b64"), clientDataHash: clientDataHash, atUnixTime: now)
            XCTAssertEqual(key.keyID, try object(made, "key_id_b64"), "flags \(flags)")
            return key
        }
        XCTAssertEqual(Set(keys.map(\.keyID)).count, 3, "each attestation is its own key, all accepted")
    }

    func testAnExpiredTrustRootIsStillAccepted() throws {
        root = try fixture(["op": "root", "expired": true])
        let made = try attestation("good")
        let key = try verifier().verifyAttestation(try object(made, "attestation_b64"), clientDataHash: clientDataHash, atUnixTime: now)
        XCTAssertEqual(key.keyID, try object(made, "key_id_b64"), "a root valid 2000-01-01..2000-02-01 only still anchors the chain")
        XCTAssertEqual(try rejection("expired"), "certificate is expired or not yet valid", "but the chain itself must be valid now")
    }

    func testAGoodAttestationYieldsTheKeyAndTheClientDataHashMatchesAnIndependentBuild() throws {
        let made = try attestation("good")
        XCTAssertEqual(try object(made, "client_data_hash_b64"), clientDataHash, "canonical clientDataHash agrees with Python")
        let key = try verifier().verifyAttestation(try object(made, "attestation_b64"), clientDataHash: clientDataHash, atUnixTime: now)
        XCTAssertEqual(key.keyID, try object(made, "key_id_b64"))
        XCTAssertEqual(key.publicKey, try object(made, "public_key_b64"))
    }

    func testEachBrokenAttestationFailsForItsOwnReason() throws {
        XCTAssertEqual(try rejection("other_root"), "intermediate not signed by the trusted root")
        XCTAssertEqual(try rejection("leaf_signed_by_root"), "leaf not signed by the intermediate")
        XCTAssertEqual(try rejection("expired"), "certificate is expired or not yet valid")
        XCTAssertEqual(try rejection("wrong_nonce"), "nonce mismatch")
        XCTAssertEqual(try rejection("wrong_app"), "rpIdHash (app id) mismatch")
        XCTAssertEqual(try rejection("development")?.hasPrefix("AAGUID/environment mismatch: got \"appattestdevelop\""), true)
        XCTAssertEqual(try rejection("good", environment: .development)?.hasPrefix("AAGUID/environment mismatch"), true,
                       "a production AAGUID under development")
        XCTAssertNil(try rejection("development", environment: .development))
        XCTAssertEqual(try rejection("credential_mismatch"), "credentialId does not match keyId")
        XCTAssertEqual(try rejection("fido"), "unexpected attestation format")
        XCTAssertEqual(try rejection("good") { Array($0.dropLast(5)) }?.hasPrefix("malformed attestation CBOR: truncated"), true)
        XCTAssertEqual(try rejection("good") { $0 + [0x00] }?.hasPrefix("malformed attestation CBOR: 1 trailing bytes"), true)
    }

    /// relay.md §5.1 "Not checked": an added check must never reject what the reference
    /// accepts, and the reference does not read the attestation's sign counter.
    /// relay.md §4.7: derived secret bytes are compared in constant time. Timing cannot be
    /// measured reliably in a unit test, so this reads the verifier's source: each check that
    /// compares derived bytes (the nonce, both rpIdHashes, the AAGUID, the credential id) is a
    /// `guard` on `constantTimeEquals`, and no byte array there is compared with `==`.
    func testDerivedByteComparisonsGoThroughTheConstantTimeComparator() throws {
        let source = try String(contentsOf: Vectors.packageRoot().appendingPathComponent("Sources/TetherAttest/AppAttestVerifier.swift"), encoding: .utf8)
        let guards = source.components(separatedBy: "guard ").dropFirst()
        for reason in ["nonce mismatch", "rpIdHash (app id) mismatch", "AAGUID/environment mismatch", "credentialId does not match keyId",
                       "assertion rpIdHash mismatch"] {
            let check = guards.filter { $0.contains("throw AppAttestError(\"\(reason)") }
            XCTAssertEqual(check.count, 1, reason)
            let condition = check.first?.components(separatedBy: " else {").first ?? ""
            XCTAssertTrue(condition.contains("constantTimeEquals("), "\(reason): \(condition)")
        }
        for line in source.split(separator: "\n") where line.contains("==") {
            XCTAssertFalse(["nonce", "Hash", "aaguid", "keyID", "authData["].contains { line.contains($0 + " ==") || line.contains("== " + $0) },
                           "a derived byte comparison with ==: \(line)")
        }
    }

    func testAnAttestationWithANonZeroSignCounterIsAcceptedAsTheReferenceDoes() throws {
        XCTAssertNil(try rejection("nonzero_counter"))
    }

    func testAnOtherClientDataHashOrOriginFailsTheNonce() throws {
        let made = try attestation("good")
        let evil = AttestClientData.hash(challenge: (try? Base64.decode(challenge)) ?? [], origin: "https://evil.example")
        XCTAssertThrowsError(try verifier().verifyAttestation(try object(made, "attestation_b64"), clientDataHash: evil, atUnixTime: now)) {
            XCTAssertEqual(($0 as? AppAttestError)?.reason, "nonce mismatch")
        }
    }

    func testAssertionsVerifyWithThePinnedKeyOnly() throws {
        let made = try attestation("good")
        let publicKey = try object(made, "public_key_b64")
        func assertion(_ variant: String, counter: Int = 1) throws -> [UInt8] {
            try object(try fixture(["op": "assert", "leaf_key_pem": made["leaf_key_pem"]!, "app_id": Self.appID, "challenge_b64": challenge,
                                    "origin": Self.origin, "counter": counter, "variant": variant]), "assertion_b64")
        }
        XCTAssertEqual(try verifier().verifyAssertion(try assertion("good", counter: 7), clientDataHash: clientDataHash, publicKey: publicKey), 7)
        func reason(_ object: [UInt8], _ hash: [UInt8]? = nil) -> String? {
            do {
                _ = try verifier().verifyAssertion(object, clientDataHash: hash ?? clientDataHash, publicKey: publicKey)
                return nil
            } catch { return (error as? AppAttestError)?.reason ?? "\(error)" }
        }
        XCTAssertEqual(reason(try assertion("other_key")), "assertion signature invalid")
        XCTAssertEqual(reason(try assertion("wrong_app")), "assertion rpIdHash mismatch")
        XCTAssertEqual(reason(try assertion("good"), SHA256.hash([1])), "assertion signature invalid", "another clientDataHash")
        XCTAssertEqual(reason(Array(try assertion("good").dropLast())), "malformed assertion CBOR: truncated")
        XCTAssertEqual(reason([0xA0]), "bad assertion shape")
    }

    private static func assertionObject(signature: [UInt8], authenticatorData: [UInt8]) -> [UInt8] {
        CBOR.map([.init(key: .text("signature"), value: .bytes(signature)),
                  .init(key: .text("authenticatorData"), value: .bytes(authenticatorData))]).encoded
    }

    private func assertionReason(_ object: [UInt8], publicKey: [UInt8]) throws -> String? {
        do {
            _ = try verifier().verifyAssertion(object, clientDataHash: clientDataHash, publicKey: publicKey)
            return nil
        } catch { return (error as? AppAttestError)?.reason ?? "\(error)" }
    }

    func testAnAssertionWithShortAuthenticatorDataIsRefused() throws {
        let publicKey = try object(try attestation("good"), "public_key_b64")
        let prefix = SHA256.hash(Array(Self.appID.utf8)) + [0x00]
        for garbage in [[UInt8](), [0x30, 0x00], [UInt8](repeating: 0xEE, count: 72)] {
            XCTAssertEqual(try assertionReason(Self.assertionObject(signature: garbage, authenticatorData: prefix + [0, 0, 7]), publicKey: publicKey),
                           "assertion authenticatorData too short", "36 bytes, before the signature is looked at")
        }
        XCTAssertEqual(try assertionReason(Self.assertionObject(signature: [0x30, 0x00], authenticatorData: []), publicKey: publicKey),
                       "assertion authenticatorData too short")
        XCTAssertEqual(try assertionReason(Self.assertionObject(signature: [0x30, 0x00], authenticatorData: prefix + [0, 0, 0, 7]), publicKey: publicKey),
                       "signature: expected INTEGER", "37 bytes pass to the signature")
        XCTAssertEqual(try assertionReason(Self.assertionObject(signature: [], authenticatorData: prefix + [0, 0, 7]), publicKey: [1]),
                       "assertion authenticatorData too short", "the length check comes before the key import")
    }

    func testAPinnedKeyThatIsNotAP256PointFailsToImport() throws {
        let made = try attestation("good")
        let publicKey = try object(made, "public_key_b64")
        let assertion = try object(try fixture(["op": "assert", "leaf_key_pem": made["leaf_key_pem"]!, "app_id": Self.appID,
                                                "challenge_b64": challenge, "origin": Self.origin, "counter": 3, "variant": "good"]),
                                   "assertion_b64")
        XCTAssertNil(try assertionReason(assertion, publicKey: publicKey))
        var offCurve = publicKey
        offCurve[64] ^= 0x01
        let bad: [(String, [UInt8])] = [
            ("64 bytes, no 0x04 prefix", Array(publicKey.dropFirst())),
            ("64 bytes, last byte dropped", Array(publicKey.dropLast())),
            ("off the curve", offCurve),
            ("0x04 and (1, 1)", [0x04] + [UInt8](repeating: 0, count: 31) + [1] + [UInt8](repeating: 0, count: 31) + [1]),
            ("empty", []),
        ]
        for (what, key) in bad {
            let reason = try assertionReason(assertion, publicKey: key)
            XCTAssertEqual(reason?.hasPrefix("pinned key import failed: "), true, "\(what): \(reason ?? "accepted")")
        }
        // Before the signature: a garbage signature with a bad key still fails the import.
        let garbage = Self.assertionObject(signature: [0xFF], authenticatorData: SHA256.hash(Array(Self.appID.utf8)) + [0, 0, 0, 0, 1])
        XCTAssertEqual(try assertionReason(garbage, publicKey: Array(publicKey.dropFirst()))?.hasPrefix("pinned key import failed: "), true)
    }
}
