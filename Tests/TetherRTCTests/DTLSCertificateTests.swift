import TetherCrypto
import TetherRTC
import XCTest

/// The per-call DTLS identity: a fresh P-256 key in a self-signed certificate around now.
final class DTLSCertificateTests: XCTestCase {
    func testEachCertificateIsAFreshSelfSignedP256KeyValidAroundNow() throws {
        let now: Int64 = 1_750_000_000
        let first = try DTLSCertificate(now: now), second = try DTLSCertificate(now: now)
        for made in [first, second] {
            XCTAssertTrue(made.certificate.isSigned(by: made.certificate), "self-signed")
            XCTAssertNotNil(made.certificate.p256PublicKey)
            XCTAssertEqual(made.certificate.notBefore, now - 24 * 60 * 60)
            XCTAssertEqual(made.certificate.notAfter, now + 30 * 24 * 60 * 60)
            XCTAssertEqual(made.fingerprint, CertificateFingerprint(of: made.certificate))
            XCTAssertTrue(made.fingerprint.matches(made.certificate))
        }
        XCTAssertNotEqual(first.certificate.p256PublicKey, second.certificate.p256PublicKey, "a new key each time")
        XCTAssertNotEqual(first.fingerprint, second.fingerprint)
        XCTAssertFalse(first.fingerprint.matches(second.certificate))
        XCTAssertTrue(try DTLSCertificate().certificate.isValid(atUnixTime: Int64(Date().timeIntervalSince1970)))
    }

    func testTheCommonNameIsRandom() throws {
        let names = try (0..<3).map { _ in try commonName(DTLSCertificate().certificate) }
        XCTAssertEqual(Set(names).count, 3, "\(names)")
        for name in names { XCTAssertTrue(name.hasPrefix("tether-") && name.count == "tether-".count + 16, name) }
    }

    /// The subject CN, read from the PEM by openssl's own printer would need a process; the
    /// DER holds the UTF8String after the CN OID (2.5.4.3).
    private func commonName(_ certificate: Certificate) throws -> String {
        let der = certificate.derRepresentation
        let oid: [UInt8] = [0x06, 0x03, 0x55, 0x04, 0x03]
        var found: [String] = []
        var index = 0
        while index + oid.count + 2 <= der.count {
            if Array(der[index..<(index + oid.count)]) == oid {
                let length = Int(der[index + oid.count + 1])
                let start = index + oid.count + 2
                found.append(String(decoding: der[start..<(start + length)], as: UTF8.self))
            }
            index += 1
        }
        XCTAssertEqual(found.count, 2, "subject and issuer")
        XCTAssertEqual(found.first, found.last, "issuer = subject")
        return try XCTUnwrap(found.first)
    }
}
