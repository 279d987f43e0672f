import Foundation
import TetherCrypto
import TetherTestSupport
import XCTest

final class CertificateTests: XCTestCase {
    /// The App Attest nonce extension; here any extension value will do.
    static let nonceOID = "1.2.840.113635.100.8.2"
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-x509-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Root → intermediate → leaf (P-256), the leaf carrying a custom extension, valid from
    /// now for `days` days.
    private func makeChain(prefix: String, days: Int = 2) throws -> (root: Certificate, intermediate: Certificate, leaf: Certificate) {
        let d = directory!
        func openssl(_ args: String) throws { _ = try runOpenSSL(args.split(separator: " ").map(String.init), in: d) }
        try "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n".write(to: d.appendingPathComponent("ca.ext"), atomically: true, encoding: .utf8)
        try "basicConstraints=critical,CA:FALSE\n\(Self.nonceOID)=DER:3024a1220420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
            .write(to: d.appendingPathComponent("leaf.ext"), atomically: true, encoding: .utf8)
        try openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-384 -nodes -keyout \(prefix)root.key -out \(prefix)root.pem -subj /CN=\(prefix)Root -days \(days) -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign")
        try openssl("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(prefix)int.key -out \(prefix)int.csr -subj /CN=\(prefix)Intermediate")
        try openssl("x509 -req -in \(prefix)int.csr -CA \(prefix)root.pem -CAkey \(prefix)root.key -CAcreateserial -out \(prefix)int.pem -days \(days) -extfile ca.ext")
        try openssl("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(prefix)leaf.key -out \(prefix)leaf.csr -subj /CN=\(prefix)Leaf")
        try openssl("x509 -req -in \(prefix)leaf.csr -CA \(prefix)int.pem -CAkey \(prefix)int.key -CAcreateserial -out \(prefix)leaf.pem -days \(days) -extfile leaf.ext")
        func load(_ name: String) throws -> Certificate {
            try Certificate(pemRepresentation: String(contentsOf: d.appendingPathComponent(name), encoding: .utf8))
        }
        return (try load("\(prefix)root.pem"), try load("\(prefix)int.pem"), try load("\(prefix)leaf.pem"))
    }

    func testChainVerifiesToItsRootOnlyInsideValidity() throws {
        let chain = try makeChain(prefix: "a")
        let now = Int64(Date().timeIntervalSince1970)
        XCTAssertNoThrow(try Certificate.verify(chain: [chain.leaf, chain.intermediate], trustAnchor: chain.root, atUnixTime: now))
        XCTAssertThrowsError(try Certificate.verify(chain: [chain.leaf, chain.intermediate], trustAnchor: chain.root, atUnixTime: now + 10 * 86400)) {
            guard case .certificateRejected(let reason)? = $0 as? CryptoError else { return XCTFail("\($0)") }
            XCTAssertTrue(reason.contains("expired"), reason)
        }
        XCTAssertThrowsError(try Certificate.verify(chain: [chain.leaf, chain.intermediate], trustAnchor: chain.root, atUnixTime: now - 10 * 86400)) {
            guard case .certificateRejected(let reason)? = $0 as? CryptoError else { return XCTFail("\($0)") }
            XCTAssertTrue(reason.contains("not yet valid"), reason)
        }
        XCTAssertThrowsError(try Certificate.verify(chain: [chain.leaf], trustAnchor: chain.root, atUnixTime: now), "missing intermediate")
        let other = try makeChain(prefix: "b")
        XCTAssertThrowsError(try Certificate.verify(chain: [chain.leaf, chain.intermediate], trustAnchor: other.root, atUnixTime: now), "foreign root")
        XCTAssertThrowsError(try Certificate.verify(chain: [chain.leaf, other.intermediate], trustAnchor: chain.root, atUnixTime: now), "foreign intermediate")
        XCTAssertThrowsError(try Certificate.verify(chain: [], trustAnchor: chain.root, atUnixTime: now))
    }

    func testReadsExtensionsPublicKeyAndValidity() throws {
        let chain = try makeChain(prefix: "c", days: 3)
        let value = try chain.leaf.extensionValue(oid: Self.nonceOID)
        XCTAssertEqual(value.map(hexString), "3024a1220420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        XCTAssertNil(try chain.leaf.extensionValue(oid: "1.2.3.4"))
        XCTAssertThrowsError(try chain.leaf.extensionValue(oid: "not an oid"))
        let key = try XCTUnwrap(chain.leaf.p256PublicKey)
        XCTAssertEqual(try P256.PublicKey(derRepresentation: chain.leaf.subjectPublicKeyInfo), key)
        XCTAssertNil(chain.root.p256PublicKey, "a P-384 key is not P-256")
        XCTAssertEqual(chain.leaf.notAfter - chain.leaf.notBefore, 3 * 86400)
        XCTAssertEqual(try Certificate(derRepresentation: chain.leaf.derRepresentation), chain.leaf)
    }

    func testParsesAppleAppAttestationRootCA() throws {
        let pem = try Vectors.text("app-attest/Apple_App_Attestation_Root_CA.pem")
        let root = try Certificate(pemRepresentation: pem)
        XCTAssertEqual(hexString(SHA256.hash(root.derRepresentation)).prefix(6), "1cb982")
        XCTAssertEqual(Date(timeIntervalSince1970: TimeInterval(root.notAfter)).description.prefix(10), "2045-03-15")
        XCTAssertEqual(Date(timeIntervalSince1970: TimeInterval(root.notBefore)).description.prefix(10), "2020-03-18")
    }

    func testRejectsMalformedInput() {
        XCTAssertThrowsError(try Certificate(derRepresentation: [0x30, 0x82, 0x01]))
        XCTAssertThrowsError(try Certificate(derRepresentation: [UInt8]()))
        XCTAssertThrowsError(try Certificate.chain(pemRepresentation: "no certificate here"))
        XCTAssertThrowsError(try Certificate(pemRepresentation: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
    }
}
