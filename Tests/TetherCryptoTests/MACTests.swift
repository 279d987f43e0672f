import TetherCrypto
import TetherTestSupport
import XCTest

final class MACTests: XCTestCase {
    func testHMACSHA256MatchesRFC4231IncludingTruncation() throws {
        let file = try Vectors.json("crypto/rfc4231-hmac-sha256.json")
        let vectors = file["vectors"] as? [[String: Any]] ?? []
        XCTAssertEqual(vectors.count, 7)
        for vector in vectors {
            let mac = HMAC.authenticationCode(.sha256, key: try vector.hex("key"), data: try vector.hex("data"))
            let expected = try vector.hex("mac")
            if let truncated = vector["truncated_to_bytes"] as? Int {
                XCTAssertEqual(Array(mac.prefix(truncated)), expected)
            } else {
                XCTAssertEqual(mac, expected, "case \(vector["test_case"] ?? "")")
            }
            XCTAssertTrue(HMAC.isValidAuthenticationCode(expected, .sha256, key: try vector.hex("key"), data: try vector.hex("data")))
        }
    }

    func testHMACSHA256Wycheproof() throws {
        let cases = try Wycheproof.cases("hmac_sha256_test")
        XCTAssertEqual(cases.count, 174)
        try Wycheproof.assertVerdicts(cases) { c in
            let tagBytes = (c.group["tagSize"] as? Int ?? 256) / 8
            let key = try c.hex("key"), msg = try c.hex("msg"), tag = try c.hex("tag")
            if c.result == "valid" {
                XCTAssertEqual(Array(HMAC.authenticationCode(.sha256, key: key, data: msg).prefix(tagBytes)), tag, c.label)
            }
            return HMAC.isValidAuthenticationCode(tag, .sha256, key: key, data: msg) && tag.count == tagBytes
        }
    }

    func testHMACSHA1MatchesRFC2202() {
        XCTAssertEqual(hexString(HMAC.authenticationCode(.sha1, key: [UInt8](repeating: 0x0b, count: 20), data: Array("Hi There".utf8))),
                       "b617318655057264e28bc0b6fb378c8ef146be00")
        XCTAssertEqual(hexString(HMAC.authenticationCode(.sha1, key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))),
                       "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    }

    func testIncrementalHMACEqualsOneShotAndCopiesFork() {
        let key = [UInt8](repeating: 9, count: 100)
        var mac = HMAC(.sha256, key: key)
        mac.update([1, 2, 3])
        let fork = mac
        mac.update([4])
        XCTAssertEqual(mac.finalize(), HMAC.authenticationCode(.sha256, key: key, data: [1, 2, 3, 4]))
        XCTAssertEqual(fork.finalize(), HMAC.authenticationCode(.sha256, key: key, data: [1, 2, 3]))
        XCTAssertEqual(HMAC.authenticationCode(.sha256, key: key, parts: [[1, 2] as [UInt8], [3, 4] as [UInt8]]), mac.finalize())
    }

    func testHMACVerificationRejectsEmptyOverlongAndAlteredCodes() {
        let key: [UInt8] = [1], data: [UInt8] = [2]
        let mac = HMAC.authenticationCode(.sha256, key: key, data: data)
        XCTAssertFalse(HMAC.isValidAuthenticationCode([UInt8](), .sha256, key: key, data: data))
        XCTAssertFalse(HMAC.isValidAuthenticationCode(mac + [0], .sha256, key: key, data: data))
        var altered = mac
        altered[31] ^= 1
        XCTAssertFalse(HMAC.isValidAuthenticationCode(altered, .sha256, key: key, data: data))
    }

    func testHKDFMatchesRFC5869() throws {
        let file = try Vectors.json("crypto/rfc5869-hkdf-sha256.json")
        let vectors = file["vectors"] as? [[String: Any]] ?? []
        XCTAssertEqual(vectors.count, 3)
        for vector in vectors {
            let okm = try HKDF.deriveKey(.sha256, inputKeyMaterial: try vector.hex("ikm"), salt: try vector.hex("salt"),
                                         info: try vector.hex("info"), outputByteCount: vector["length"] as? Int ?? 0)
            XCTAssertEqual(okm, try vector.hex("okm"))
        }
    }

    func testHKDFWycheproofIncludingOversizedOutputs() throws {
        let cases = try Wycheproof.cases("hkdf_sha256_test")
        XCTAssertEqual(cases.count, 86)
        for c in cases {
            let size = c.int("size") ?? 0
            let result = try? HKDF.deriveKey(.sha256, inputKeyMaterial: try c.hex("ikm"), salt: try c.hex("salt"),
                                             info: try c.hex("info"), outputByteCount: size)
            switch c.result {
            case "valid": XCTAssertEqual(result, try c.hex("okm"), c.label)
            case "invalid": XCTAssertNil(result, c.label)
            default: XCTFail("unexpected result \(c.result) in \(c.label)")
            }
        }
    }

    func testHKDFEmptySaltEqualsHashLengthZeros() throws {
        let ikm = [UInt8](repeating: 0x42, count: 20)
        let absent = try HKDF.deriveKey(inputKeyMaterial: ikm, info: Array("x".utf8), outputByteCount: 32)
        let zeros = try HKDF.deriveKey(inputKeyMaterial: ikm, salt: [UInt8](repeating: 0, count: 32), info: Array("x".utf8), outputByteCount: 32)
        XCTAssertEqual(absent, zeros)
        XCTAssertThrowsError(try HKDF.deriveKey(inputKeyMaterial: ikm, outputByteCount: 0))
        XCTAssertThrowsError(try HKDF.deriveKey(inputKeyMaterial: ikm, outputByteCount: 255 * 32 + 1))
        XCTAssertEqual(try HKDF.deriveKey(inputKeyMaterial: [UInt8](), outputByteCount: 42).count, 42)
    }

    func testConstantTimeEqualsComparesContentAndLength() {
        XCTAssertTrue(constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        XCTAssertFalse(constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        XCTAssertFalse(constantTimeEquals([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        XCTAssertTrue(constantTimeEquals([UInt8](), [UInt8]()))
    }

    func testSecureRandomProducesDistinctFullLengthOutput() {
        let a = SecureRandom.bytes(32), b = SecureRandom.bytes(32)
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(SecureRandom.bytes(0), [])
        // 64 KiB of output has every byte value; a stuck generator would not.
        XCTAssertEqual(Set(SecureRandom.bytes(65536)).count, 256)
    }
}
