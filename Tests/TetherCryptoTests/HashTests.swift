import TetherCrypto
import TetherTestSupport
import XCTest

final class HashTests: XCTestCase {
    func testSHA256AndSHA512MatchFIPS180Abc() {
        XCTAssertEqual(hexString(SHA256.hash(Array("abc".utf8))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hexString(SHA512.hash(Array("abc".utf8))),
                       "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
    }

    func testIncrementalHashEqualsOneShotAndCopiesFork() {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        for function in HashFunction.allCases {
            var hash = IncrementalHash(function)
            hash.update(data[..<300])
            let fork = hash
            hash.update(data[300...])
            XCTAssertEqual(hash.finalize(), function.hash(data), "\(function)")
            XCTAssertEqual(hash.finalize(), hash.finalize(), "finalize leaves the state unchanged")
            XCTAssertEqual(fork.finalize(), function.hash(data[..<300]), "a copy keeps its own state")
            XCTAssertEqual(function.hash(parts: [data[..<10], data[10...]]), function.hash(data))
            XCTAssertEqual(function.hash(data).count, function.byteCount)
        }
    }

    func testBLAKE2sMatchesRFC7693AndReferenceVectors() throws {
        let file = try Vectors.json("crypto/rfc7693-blake2s.json")
        var checked = 0
        for vector in file["vectors"] as? [[String: Any]] ?? [] {
            switch vector["kind"] as? String {
            case "hash":
                XCTAssertEqual(vector["digest_size"] as? Int, 32)
                XCTAssertEqual(hexString(BLAKE2s.hash(try vector.hex("message"))), vector["digest"] as? String)
                checked += 1
            case "selftest_grand_hash":
                // Needs unkeyed BLAKE2s at 16/20/28-byte outputs, which OpenSSL 3.0 does not
                // offer; the grand hash is checked where that variant exists (see the README).
                continue
            default:
                XCTFail("unknown BLAKE2s vector kind \(vector["kind"] ?? "nil")")
            }
        }
        XCTAssertEqual(checked, 8)
    }

    func testBLAKE2sKnownAnswersKeyedAndUnkeyed() throws {
        let file = try Vectors.json("crypto/blake2s-kat.json")
        let vectors = file["vectors"] as? [[String: Any]] ?? []
        XCTAssertEqual(vectors.count, 512)
        for vector in vectors {
            let input = try vector.hex("in")
            let key = try vector.hex("key")
            let out = key.isEmpty ? BLAKE2s.hash(input) : try BLAKE2s.hash(input, key: key)
            XCTAssertEqual(hexString(out), vector["out"] as? String, "len \(input.count) keyed \(!key.isEmpty)")
        }
    }

    func testBLAKE2sOfficialKeyedKATTextFile() throws {
        let text = try Vectors.text("crypto/raw/BLAKE2/blake2s-kat.txt")
        var input: [UInt8] = []
        var key: [UInt8] = []
        var checked = 0
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "in": input = try hexBytes(parts[1])
            case "key": key = try hexBytes(parts[1])
            case "hash":
                XCTAssertEqual(hexString(try BLAKE2s.hash(input, key: key)), parts[1])
                checked += 1
            default: break
            }
        }
        XCTAssertEqual(checked, 256)
    }

    func testBLAKE2sRejectsBadKeyAndOutputLengths() {
        XCTAssertThrowsError(try BLAKE2s.hash([1], key: [UInt8](repeating: 1, count: 33)))
        XCTAssertThrowsError(try BLAKE2s.hash([1], key: [UInt8]()))
        XCTAssertThrowsError(try BLAKE2s.hash([1], key: [1], outputByteCount: 0))
        XCTAssertThrowsError(try BLAKE2s.hash([1], key: [1], outputByteCount: 33))
        XCTAssertEqual(try BLAKE2s.hash([1], key: [1], outputByteCount: 16).count, 16)
    }

    func testHMACAndHKDFOverBLAKE2sMatchPythonHashlib() throws {
        // Reference values from CPython's hmac + hashlib.blake2s (the construction Noise uses).
        let key = [UInt8](0..<32)
        XCTAssertEqual(hexString(HMAC.authenticationCode(.blake2s, key: key, data: Array("noise".utf8))),
                       "5e7d00b579e32373a64507b6266bf347a6d09728deeef2d2e64aac60955d71e7")
        let okm = try HKDF.deriveKey(.blake2s, inputKeyMaterial: [UInt8](repeating: 0x11, count: 32), salt: key, outputByteCount: 64)
        XCTAssertEqual(hexString(okm),
                       "cd98dac39492cacaa22a04f5a6ffbf042fdd64223cf7521689beee8098ecfe1b92415df3040c0dc1476eefff2b979c6e5be29ff1caaf7633cb19a6414456480a")
    }
}
