import TetherCrypto
import TetherRTC
import XCTest

/// The SDP fingerprint of a DTLS certificate (RFC 8122 §5): sha-256 over the DER, written as
/// colon-separated hex pairs, read strictly, compared in constant time.
final class CertificateFingerprintTests: XCTestCase {
    func certificate() throws -> Certificate {
        let key = P256.PrivateKey()
        return try Certificate.issue(subject: "WebRTC", subjectKey: key.publicKey, issuer: "WebRTC", issuerKey: key,
                                     notBefore: 1_700_000_000, notAfter: 1_800_000_000)
    }

    func testTheFingerprintIsTheSHA256OfTheDERInUppercasePairs() throws {
        let cert = try certificate()
        let fingerprint = CertificateFingerprint(of: cert)
        XCTAssertEqual(fingerprint.digest, SHA256.hash(cert.derRepresentation))
        XCTAssertEqual(fingerprint.value.count, "sha-256 ".count + 32 * 3 - 1)
        XCTAssertTrue(fingerprint.value.hasPrefix("sha-256 "))
        XCTAssertEqual(try CertificateFingerprint.parse(fingerprint.value), fingerprint)
        XCTAssertEqual(try CertificateFingerprint.parse("SHA-256 " + fingerprint.value.dropFirst(8).lowercased()), fingerprint,
                       "the name and the hex digits in either case")
        XCTAssertTrue(fingerprint.matches(cert))
        XCTAssertFalse(fingerprint.matches(try certificate()))
    }

    func testOtherHashesAndMalformedValuesAreRefused() {
        let pairs = Array(repeating: "AB", count: 32).joined(separator: ":")
        XCTAssertEqual(try? CertificateFingerprint.parse("sha-256 " + pairs).digest, [UInt8](repeating: 0xAB, count: 32))
        for (value, error) in [("sha-1 " + Array(repeating: "AB", count: 20).joined(separator: ":"), CertificateFingerprint.ParseError.unsupportedAlgorithm("sha-1")),
                               ("sha-256  " + pairs, .malformed), ("sha-256 " + pairs + ":", .malformed), ("sha-256 " + pairs.dropLast(3), .malformed),
                               ("sha-256 " + pairs.replacingOccurrences(of: "AB:AB", with: "ABAB"), .malformed), ("sha-256 A" + pairs.dropFirst(2), .malformed),
                               ("sha-256 " + pairs.replacingOccurrences(of: "AB", with: "G1"), .malformed), ("sha-256", .malformed)] {
            XCTAssertThrowsError(try CertificateFingerprint.parse(value)) { XCTAssertEqual($0 as? CertificateFingerprint.ParseError, error, value) }
        }
    }
}
