import Foundation
import TetherAttest
import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest

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

    private func attestation(_ variant: String) throws -> [String: Any] {
        try fixture(["op": "attest", "root_pem": root["root_pem"]!, "root_key_pem": root["root_key_pem"]!, "app_id": Self.appID,
                     "challenge_b64": challenge, "origin": Self.origin, "variant": variant])
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
}
