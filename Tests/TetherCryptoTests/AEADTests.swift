@_spi(RawPrimitives) import TetherCrypto
import TetherTestSupport
import XCTest

final class AEADTests: XCTestCase {
    func testChaCha20Poly1305MatchesEveryRFC8439Vector() throws {
        let file = try Vectors.json("crypto/rfc8439-chacha20-poly1305.json")
        var kinds: [String: Int] = [:]
        for v in file["vectors"] as? [[String: Any]] ?? [] {
            let kind = v["kind"] as? String ?? ""
            kinds[kind, default: 0] += 1
            switch kind {
            case "aead":
                var cipher = try AEAD(.chaCha20Poly1305, key: try v.hex("key"))
                let sealed = try cipher.seal(try v.hex("plaintext"), nonce: try v.hex("nonce"), authenticating: try v.hex("aad"))
                XCTAssertEqual(sealed, try v.hex("ciphertext") + v.hex("tag"))
                XCTAssertEqual(try cipher.open(sealed, nonce: try v.hex("nonce"), authenticating: try v.hex("aad")), try v.hex("plaintext"))
            case "aead_decrypt":
                var cipher = try AEAD(.chaCha20Poly1305, key: try v.hex("key"))
                let opened = try cipher.open(ciphertext: try v.hex("ciphertext"), tag: try v.hex("tag"),
                                             nonce: try v.hex("nonce"), authenticating: try v.hex("aad"))
                XCTAssertEqual(opened, try v.hex("plaintext"))
            case "chacha20_block":
                let block = try ChaCha20.block(key: try v.hex("key"), nonce: try v.hex("nonce"), counter: UInt32(v["counter"] as? Int ?? 0))
                XCTAssertEqual(block, try v.hex("keystream"))
            case "chacha20_encrypt":
                let out = try ChaCha20.apply(key: try v.hex("key"), nonce: try v.hex("nonce"),
                                             counter: UInt32(v["counter"] as? Int ?? 0), try v.hex("plaintext"))
                XCTAssertEqual(out, try v.hex("ciphertext"))
            case "poly1305":
                XCTAssertEqual(try Poly1305.authenticate(key: try v.hex("key"), message: try v.hex("message")), try v.hex("tag"))
            case "poly1305_key_gen":
                XCTAssertEqual(try Poly1305.keyGeneration(key: try v.hex("key"), nonce: try v.hex("nonce")), try v.hex("one_time_key"))
            default:
                XCTFail("unknown RFC 8439 vector kind \(kind)")
            }
        }
        XCTAssertEqual(kinds, ["aead": 1, "aead_decrypt": 1, "chacha20_block": 5, "chacha20_encrypt": 3, "poly1305": 11, "poly1305_key_gen": 3])
    }

    func testChaCha20Poly1305Wycheproof() throws {
        let cases = try Wycheproof.cases("chacha20_poly1305_test")
        XCTAssertEqual(cases.count, 325)
        for c in cases {
            let key = try c.hex("key"), iv = try c.hex("iv"), aad = try c.hex("aad")
            let msg = try c.hex("msg"), ct = try c.hex("ct"), tag = try c.hex("tag")
            let opened: [UInt8]? = try? {
                var cipher = try AEAD(.chaCha20Poly1305, key: key)
                return try cipher.open(ciphertext: ct, tag: tag, nonce: iv, authenticating: aad)
            }()
            switch c.result {
            case "valid":
                var cipher = try AEAD(.chaCha20Poly1305, key: key)
                XCTAssertEqual(try cipher.seal(msg, nonce: iv, authenticating: aad), ct + tag, c.label)
                XCTAssertEqual(opened, msg, c.label)
            case "invalid":
                XCTAssertNil(opened, c.label)
            default:
                XCTFail("unexpected result \(c.result) in \(c.label)")
            }
        }
    }

    func testChaCha20Poly1305CryptographyVectorFiles() throws {
        // The two files name their fields differently (boringssl: KEY/NONCE/IN/AD/CT/TAG;
        // openssl: Key/IV/Plaintext/AAD/Ciphertext/Tag, with `Result = CIPHERFINAL_ERROR`).
        // A value is hex, or a quoted ASCII string.
        func field(_ record: CAVPRecord, _ names: String...) throws -> [UInt8] {
            let value = names.lazy.compactMap { record.fields[$0] }.first ?? ""
            return value.hasPrefix("\"") ? Array(value.dropFirst().dropLast().utf8) : try hexBytes(value)
        }
        var checked = 0, failing = 0
        for name in ["ChaCha20Poly1305-openssl.txt", "ChaCha20Poly1305-boringssl.txt"] {
            let text = try Vectors.text("crypto/raw/cryptography_vectors-50.0.2/\(name)")
            for record in CAVPRecord.parse(text) {
                guard record.fields["KEY"] != nil || record.fields["Key"] != nil else { continue }
                let label = "\(name) COUNT \(record.fields["COUNT"] ?? "?")"
                let key = try field(record, "KEY", "Key"), nonce = try field(record, "NONCE", "IV")
                let aad = try field(record, "AD", "AAD"), ct = try field(record, "CT", "Ciphertext")
                let tag = try field(record, "TAG", "Tag"), plaintext = try field(record, "IN", "Plaintext")
                var cipher = try AEAD(.chaCha20Poly1305, key: key)
                let opened = try? cipher.open(ciphertext: ct, tag: tag, nonce: nonce, authenticating: aad)
                if record.fields["Result"] == "CIPHERFINAL_ERROR" {
                    XCTAssertNil(opened, label)
                    failing += 1
                } else {
                    XCTAssertEqual(opened, plaintext, label)
                    XCTAssertEqual(try cipher.seal(plaintext, nonce: nonce, authenticating: aad), ct + tag, label)
                }
                checked += 1
            }
        }
        XCTAssertEqual(checked, 71)
        XCTAssertEqual(failing, 1)
    }

    func testAES256GCMMatchesNISTCAVPVectors() throws {
        let directory = try PythonPackageVectors.directory("cryptography_vectors").appendingPathComponent("ciphers/AES/GCM")
        var valid = 0, failing = 0, outsideAPI = 0
        for name in ["gcmEncryptExtIV256.rsp", "gcmDecrypt256.rsp"] {
            let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            for record in CAVPRecord.parse(text) {
                guard let keyHex = record.fields["Key"] else { continue }
                // Tether's AES-GCM takes 96-bit nonces and full 128-bit tags only.
                guard record.parameters["IVlen"] == "96", record.parameters["Taglen"] == "128" else {
                    outsideAPI += 1
                    continue
                }
                let key = try hexBytes(keyHex), iv = try hexBytes(record.fields["IV"] ?? "")
                let aad = try hexBytes(record.fields["AAD"] ?? ""), ct = try hexBytes(record.fields["CT"] ?? "")
                let tag = try hexBytes(record.fields["Tag"] ?? "")
                var cipher = try AEAD(.aes256GCM, key: key)
                let opened = try? cipher.open(ciphertext: ct, tag: tag, nonce: iv, authenticating: aad)
                if record.fails {
                    XCTAssertNil(opened, "\(name) \(keyHex)")
                    failing += 1
                } else {
                    let pt = try hexBytes(record.fields["PT"] ?? "")
                    XCTAssertEqual(opened, pt, "\(name) \(keyHex)")
                    let detached = try cipher.sealDetached(pt, nonce: iv, authenticating: aad)
                    XCTAssertEqual(detached.ciphertext, ct)
                    XCTAssertEqual(detached.tag, tag)
                    valid += 1
                }
            }
        }
        XCTAssertGreaterThan(valid, 400)
        XCTAssertGreaterThan(failing, 100)
        XCTAssertGreaterThan(outsideAPI, 0)
    }

    func testAnyFlippedBitFailsToOpenAndLeavesNoPlaintext() throws {
        for algorithm in [AEAD.Algorithm.chaCha20Poly1305, .aes256GCM] {
            var cipher = try AEAD(algorithm, key: [UInt8](repeating: 7, count: 32))
            let nonce = [UInt8](repeating: 1, count: 12), aad: [UInt8] = [9, 9]
            let sealed = try cipher.seal(Array("attack at dawn".utf8), nonce: nonce, authenticating: aad)
            for bit in 0..<(sealed.count * 8) {
                var tampered = sealed
                tampered[bit / 8] ^= UInt8(1 << (bit % 8))
                XCTAssertThrowsError(try cipher.open(tampered, nonce: nonce, authenticating: aad)) {
                    XCTAssertEqual($0 as? CryptoError, .authenticationFailure)
                }
            }
            XCTAssertThrowsError(try cipher.open(sealed, nonce: nonce, authenticating: [9]))
            XCTAssertThrowsError(try cipher.open(sealed, nonce: [UInt8](repeating: 2, count: 12), authenticating: aad))
            XCTAssertThrowsError(try cipher.open(Array(sealed.prefix(15)), nonce: nonce, authenticating: aad))

            // The pointer form zeroes its output buffer on failure.
            var tampered = sealed
            tampered[0] ^= 1
            var output = [UInt8](repeating: 0xaa, count: sealed.count - 16)
            let n = nonce, a = aad
            let thrown: CryptoError? = tampered.withUnsafeBytes { ct in
                n.withUnsafeBytes { n in
                    a.withUnsafeBytes { a in
                        output.withUnsafeMutableBytes { out -> CryptoError? in
                            do {
                                try cipher.open(ciphertext: UnsafeRawBufferPointer(rebasing: ct[..<(ct.count - 16)]),
                                                tag: UnsafeRawBufferPointer(rebasing: ct[(ct.count - 16)...]),
                                                nonce: n, authenticating: a, plaintext: out)
                                return nil
                            } catch { return error as? CryptoError }
                        }
                    }
                }
            }
            XCTAssertEqual(thrown, .authenticationFailure)
            XCTAssertEqual(output, [UInt8](repeating: 0, count: output.count))
        }
    }

    func testCombinedAndDetachedFormsAgreeAndCopiesAreIndependent() throws {
        let key = SecureRandom.bytes(32), nonce = SecureRandom.bytes(12)
        for algorithm in [AEAD.Algorithm.chaCha20Poly1305, .aes256GCM] {
            var a = try AEAD(algorithm, key: key)
            var b = a
            let message = SecureRandom.bytes(1000)
            let combined = try a.seal(message, nonce: nonce)
            let detached = try b.sealDetached(message, nonce: nonce)
            XCTAssertEqual(combined, detached.ciphertext + detached.tag)
            XCTAssertEqual(try b.open(ciphertext: detached.ciphertext, tag: detached.tag, nonce: nonce), message)
            XCTAssertEqual(try AEAD.open(algorithm, key: key, nonce: nonce, combined: combined), message)
            XCTAssertEqual(try AEAD.seal(algorithm, key: key, nonce: nonce, plaintext: [UInt8]()).count, 16)
        }
    }

    func testRejectsWrongKeyNonceAndTagSizes() {
        XCTAssertThrowsError(try AEAD(.chaCha20Poly1305, key: [UInt8](repeating: 0, count: 16))) {
            XCTAssertEqual($0 as? CryptoError, .invalidKeySize(expected: 32, actual: 16))
        }
        XCTAssertThrowsError(try AEAD.seal(.aes256GCM, key: [UInt8](repeating: 0, count: 32), nonce: [UInt8](repeating: 0, count: 8),
                                           plaintext: [1])) {
            XCTAssertEqual($0 as? CryptoError, .invalidNonceSize(expected: 12, actual: 8))
        }
        XCTAssertThrowsError(try {
            var c = try AEAD(.aes256GCM, key: [UInt8](repeating: 0, count: 32))
            return try c.open(ciphertext: [1, 2], tag: [1, 2, 3], nonce: [UInt8](repeating: 0, count: 12))
        }())
    }
}
