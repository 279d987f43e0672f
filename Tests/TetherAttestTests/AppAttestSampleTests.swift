import Foundation
import TetherAttest
import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// Every real Apple sample of `vectors/app-attest/samples.json`, verified at its own time with
/// its recorded app id and clientDataHash (which each sample documents: Apple's guide uses the
/// raw challenge, others a SHA-256 of their client data).
final class AppAttestSampleTests: XCTestCase {
    private func samples(_ kind: String) throws -> [[String: Any]] {
        let all = try XCTUnwrap(try Vectors.json("app-attest/samples.json")["samples"] as? [[String: Any]])
        return all.filter { $0["kind"] as? String == kind }
    }

    private func unixTime(_ text: String) throws -> Int64 {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
        return Int64(try XCTUnwrap(date, text).timeIntervalSince1970)
    }

    private func environment(_ sample: [String: Any]) -> AppAttestVerifier.Environment {
        sample["environment"] as? String == "production" ? .production : .development
    }

    func testEveryRealAttestationVerifiesAtItsTimeAndFailsNow() throws {
        let attestations = try samples("attestation")
        XCTAssertEqual(attestations.count, 14)
        var verified = 0
        for sample in attestations {
            let id = sample["id"] as? String ?? "?"
            let verifier = try AppAttestVerifier(appID: try XCTUnwrap(sample["app_id"] as? String), environment: environment(sample))
            // One sample (bas-d) carries its object in the base64url alphabet despite the field name.
            let text = try XCTUnwrap(sample["attestation_b64"] as? String)
            let object = try (try? Base64.decodeForgiving(text)) ?? Base64.decodeURL(text.replacingOccurrences(of: "=", with: ""))
            let clientDataHash = try Base64.decodeForgiving(sample["client_data_hash_b64"] as? String ?? "")
            let at = try unixTime(try XCTUnwrap(sample["verification_time"] as? String))
            if sample["expected_result_at_verification_time"] as? String == "valid" {
                let key = try verifier.verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: at)
                XCTAssertEqual(Base64.encode(key.keyID), sample["key_id_b64"] as? String, id)
                let checks = sample["checks_at_verification_time"] as? [String: Any]
                if let point = checks?["public_key_x962_hex"] as? String { XCTAssertEqual(Hex.encode(key.publicKey), point, id) }
                verified += 1
            } else {
                // Structure-only (pyattest: its challenge was never published): everything up to the nonce holds.
                XCTAssertThrowsError(try verifier.verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: at), id) {
                    XCTAssertEqual(($0 as? AppAttestError)?.reason, "nonce mismatch", id)
                }
            }
            // Every sample has expired by 2026-11-29.
            XCTAssertThrowsError(try verifier.verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: 1_795_910_400), id) {
                XCTAssertEqual(($0 as? AppAttestError)?.reason, "certificate is expired or not yet valid", id)
            }
        }
        XCTAssertEqual(verified, 13)
    }

    func testApplesDocumentedSampleAndItsDocumentedNegatives() throws {
        let sample = try XCTUnwrap(try samples("attestation").first { $0["id"] as? String == "apple-doc-validation-guide-2024-04" })
        let object = try Base64.decodeForgiving(try XCTUnwrap(sample["attestation_b64"] as? String))
        let at = try unixTime("2024-04-18T12:00:00Z")
        let production = try AppAttestVerifier(appID: "0352187391.com.apple.example_app_attest", environment: .production)
        func reason(_ verifier: AppAttestVerifier, challenge: String, at time: Int64) -> String? {
            do {
                _ = try verifier.verifyAttestation(object, clientDataHash: Array(challenge.utf8), atUnixTime: time)
                return nil
            } catch { return error.reason }
        }
        XCTAssertNil(reason(production, challenge: "test_server_challenge", at: at))
        XCTAssertEqual(reason(production, challenge: "test_server_challenge", at: try unixTime("2024-04-21T12:00:00Z")), "certificate is expired or not yet valid")
        XCTAssertEqual(reason(production, challenge: "invalid_server_challenge", at: at), "nonce mismatch")
        let otherApp = try AppAttestVerifier(appID: "0352187391.com.apple.different_app_attest", environment: .production)
        XCTAssertEqual(reason(otherApp, challenge: "test_server_challenge", at: at), "rpIdHash (app id) mismatch")
        let development = try AppAttestVerifier(appID: "0352187391.com.apple.example_app_attest", environment: .development)
        XCTAssertEqual(reason(development, challenge: "test_server_challenge", at: at)?.hasPrefix("AAGUID/environment mismatch"), true)
        let otherRoot = try AppAttestVerifier(appID: "0352187391.com.apple.example_app_attest", environment: .production,
                                              root: try Certificate(derRepresentation: try XCTUnwrap(leafAndIntermediate(object).last)))
        XCTAssertEqual(reason(otherRoot, challenge: "test_server_challenge", at: at), "intermediate not signed by the trusted root")
    }

    func testEveryRealAssertionVerifiesWithItsKeyAndCounter() throws {
        let assertions = try samples("assertion")
        XCTAssertEqual(assertions.count, 10)
        for sample in assertions {
            let id = sample["id"] as? String ?? "?"
            let verifier = try AppAttestVerifier(appID: try XCTUnwrap(sample["app_id"] as? String), environment: .production)
            let object = try Base64.decodeForgiving(try XCTUnwrap(sample["assertion_b64"] as? String))
            let clientDataHash = try Base64.decodeForgiving(try XCTUnwrap(sample["client_data_hash_b64"] as? String))
            let key: [UInt8]
            if let pem = (sample["public_key_pem"] ?? sample["expected_public_key_pem"]) as? String {
                let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                key = try P256.PublicKey(derRepresentation: try Base64.decodeForgiving(body)).x963Representation
            } else {
                key = try Hex.decode(try XCTUnwrap((sample["public_key_x962_hex"] ?? sample["expected_public_key_x962_hex"]) as? String, id))
            }
            let counter = try verifier.verifyAssertion(object, clientDataHash: clientDataHash, publicKey: key)
            let expected = sample["expected_counter"] as? Int ?? (sample["checks"] as? [String: Any])?["counter"] as? Int
            XCTAssertEqual(Int(counter), expected, id)
            XCTAssertThrowsError(try verifier.verifyAssertion(object, clientDataHash: SHA256.hash(Array("{}".utf8)), publicKey: key), id) {
                XCTAssertEqual(($0 as? AppAttestError)?.reason, "assertion signature invalid", id)
            }
            let otherApp = try AppAttestVerifier(appID: "INVALID", environment: .production)
            XCTAssertThrowsError(try otherApp.verifyAssertion(object, clientDataHash: clientDataHash, publicKey: key), id) {
                XCTAssertEqual(($0 as? AppAttestError)?.reason, "assertion rpIdHash mismatch", id)
            }
        }
    }

    /// x5c of an attestation object, leaf first.
    private func leafAndIntermediate(_ object: [UInt8]) throws -> [[UInt8]] {
        let decoded = try CBORDecoder(profile: .appAttest).decode(object)
        return try XCTUnwrap(decoded["attStmt"]?["x5c"]?.arrayValue?.compactMap(\.bytesValue))
    }
}
