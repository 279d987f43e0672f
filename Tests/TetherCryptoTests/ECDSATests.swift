import Foundation
import TetherCrypto
import TetherTestSupport
import XCTest

final class ECDSATests: XCTestCase {
    private func publicKey(_ c: WycheproofCase) throws -> P256.PublicKey {
        let uncompressed = (c.group["publicKey"] as? [String: Any])?["uncompressed"] as? String ?? ""
        let fromPoint = try P256.PublicKey(x963Representation: try hexBytes(uncompressed))
        let fromDER = try P256.PublicKey(derRepresentation: try hexBytes(c.group["publicKeyDer"] as? String ?? ""))
        XCTAssertEqual(fromPoint, fromDER)
        XCTAssertEqual(fromPoint.derRepresentation, try hexBytes(c.group["publicKeyDer"] as? String ?? ""))
        return fromPoint
    }

    func testWycheproofDERSignatures() throws {
        let cases = try Wycheproof.cases("ecdsa_secp256r1_sha256_test")
        XCTAssertEqual(cases.count, 484)
        try Wycheproof.assertVerdicts(cases) { c in
            try publicKey(c).isValidSignature(derRepresentation: try c.hex("sig"), for: try c.hex("msg"))
        }
    }

    func testWycheproofP1363Signatures() throws {
        let cases = try Wycheproof.cases("ecdsa_secp256r1_sha256_p1363_test")
        XCTAssertEqual(cases.count, 262)
        try Wycheproof.assertVerdicts(cases) { c in
            try publicKey(c).isValidSignature(rawRepresentation: try c.hex("sig"), for: try c.hex("msg"))
        }
    }

    func testRFC7515AppendixA3ES256() throws {
        let v = try Vectors.json("jwt-apns/rfc7515-a3-es256.json")
        let key = try P256.PublicKey(x963Representation: try v.hex("public_key_x962_hex"))
        let input = Array((v["signing_input"] as? String ?? "").utf8)
        let raw = try v.hex("signature_r_hex") + v.hex("signature_s_hex")
        XCTAssertTrue(key.isValidSignature(rawRepresentation: raw, for: input))
        let jwk = v["jwk_private"] as? [String: String] ?? [:]
        let privateKey = try P256.PrivateKey(rawRepresentation: try base64URLBytes(jwk["d"] ?? ""))
        XCTAssertEqual(privateKey.publicKey, key, "d matches x, y")
        let negatives = v["negative_cases"] as? [[String: Any]] ?? []
        XCTAssertEqual(negatives.count, 3)
        for negative in negatives {
            let parts = (negative["compact"] as? String ?? "").split(separator: ".", omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, 3)
            let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
            let signature = (try? base64URLBytes(String(parts[2]))) ?? []
            XCTAssertFalse(key.isValidSignature(rawRepresentation: signature, for: signingInput), "\(negative["change"] ?? "")")
        }
    }

    func testSignThenVerifyInBothEncodingsAndPEMRoundTrip() throws {
        let key = P256.PrivateKey()
        let message = Array("apns".utf8)
        let signature = try key.signature(for: message)
        XCTAssertEqual(signature.rawRepresentation.count, 64)
        XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message))
        XCTAssertTrue(key.publicKey.isValidSignature(rawRepresentation: signature.rawRepresentation, for: message))
        XCTAssertTrue(key.publicKey.isValidSignature(derRepresentation: signature.derRepresentation, for: message))
        XCTAssertEqual(try P256.Signature(rawRepresentation: signature.rawRepresentation).derRepresentation, signature.derRepresentation)
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: Array("apnz".utf8)))
        XCTAssertFalse(P256.PrivateKey().publicKey.isValidSignature(signature, for: message))

        let pem = key.pemRepresentation
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"), "PKCS#8, as an APNs .p8 file")
        let reloaded = try P256.PrivateKey(pemRepresentation: pem)
        XCTAssertEqual(reloaded.publicKey, key.publicKey)
        XCTAssertTrue(key.publicKey.isValidSignature(try reloaded.signature(for: message), for: message))
        XCTAssertEqual(try P256.PublicKey(derRepresentation: key.publicKey.derRepresentation), key.publicKey)
    }

    func testImportsOpenSSLGeneratedP8AndSEC1KeysAndRefusesOtherCurves() throws {
        let p8 = try runOpenSSL(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        XCTAssertNoThrow(try P256.PrivateKey(pemRepresentation: p8))
        let sec1 = try runOpenSSL(["ecparam", "-name", "prime256v1", "-genkey", "-noout"])
        XCTAssertTrue(sec1.contains("BEGIN EC PRIVATE KEY"))
        XCTAssertNoThrow(try P256.PrivateKey(pemRepresentation: sec1))
        let p384 = try runOpenSSL(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        XCTAssertThrowsError(try P256.PrivateKey(pemRepresentation: p384)) { XCTAssertEqual($0 as? CryptoError, .invalidPrivateKey) }
        XCTAssertThrowsError(try P256.PrivateKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
        XCTAssertThrowsError(try P256.PrivateKey(pemRepresentation: ""))
    }

    func testRejectsPointsOffTheCurveAndMalformedEncodings() throws {
        let key = P256.PrivateKey().publicKey
        var point = key.x963Representation
        point[64] ^= 1
        XCTAssertThrowsError(try P256.PublicKey(x963Representation: point)) { XCTAssertEqual($0 as? CryptoError, .invalidPublicKey) }
        XCTAssertThrowsError(try P256.PublicKey(x963Representation: [0x04] + [UInt8](repeating: 0, count: 64)))
        XCTAssertThrowsError(try P256.PublicKey(x963Representation: Array(key.x963Representation.prefix(33))))
        XCTAssertThrowsError(try P256.PublicKey(derRepresentation: key.derRepresentation + [0]))
        XCTAssertThrowsError(try P256.PublicKey(derRepresentation: [0x30, 0x03, 0x02, 0x01]))
        XCTAssertThrowsError(try P256.Signature(rawRepresentation: [UInt8](repeating: 1, count: 63)))
        XCTAssertThrowsError(try P256.Signature(derRepresentation: [0x30, 0x00]))
        XCTAssertThrowsError(try P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0, count: 32)))
        XCTAssertThrowsError(try P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0xff, count: 32)), "scalar ≥ n")
    }
}

func base64URLBytes(_ text: String) throws -> [UInt8] {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    guard let data = Data(base64Encoded: s) else { throw Vectors.Failure.malformed("base64url") }
    return [UInt8](data)
}

/// Runs the `openssl` command-line tool and returns its standard output.
func runOpenSSL(_ arguments: [String], in directory: URL? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.runWithSignalsUnblocked()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw Vectors.Failure.malformed("openssl \(arguments.joined(separator: " ")) failed") }
    return String(decoding: data, as: UTF8.self)
}
