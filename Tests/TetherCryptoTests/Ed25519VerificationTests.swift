import CSodium
@testable import TetherCrypto
import TetherTestSupport
import XCTest

/// The verifier answers through libsodium and falls back to OpenSSL only for small-order A or
/// R. These pin that the combination is OpenSSL's verdict on every vector we hold, and that the
/// small-order table is exactly the eight points of order dividing 8.
final class Ed25519VerificationTests: XCTestCase {
    /// (key, signature, message) of every CCTV, Wycheproof and djb vector.
    private func everyVector() throws -> [(key: [UInt8], signature: [UInt8], message: [UInt8])] {
        var all: [(key: [UInt8], signature: [UInt8], message: [UInt8])] = []
        for v in try Vectors.jsonArray("crypto/cctv-ed25519/ed25519vectors.json") {
            all.append((try v.hex("key"), try v.hex("sig"), Array((v["msg"] as? String ?? "").utf8)))
        }
        for c in try Wycheproof.cases("ed25519_test") {
            let key = (c.group["publicKey"] as? [String: Any])?["pk"] as? String ?? ""
            all.append((try hexBytes(key), try c.hex("sig"), try c.hex("msg")))
        }
        let djb = try Vectors.text("crypto/raw/cryptography_vectors-50.0.2/Ed25519-sign.input")
        for line in djb.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 4 else { continue }
            all.append((try hexBytes(fields[1]), Array(try hexBytes(fields[3]).prefix(64)), try hexBytes(fields[2])))
        }
        return all
    }

    private func isCanonical(_ key: [UInt8], _ signature: [UInt8]) -> Bool {
        signature.count == 64 && key.count == 32
            && signature.prefix(32).withUnsafeBytes { Ed25519.isCanonicalPointEncoding($0) }
            && key.withUnsafeBytes { Ed25519.isCanonicalPointEncoding($0) }
    }

    /// OpenSSL alone, after the canonical-encoding checks: the verdict the verifier must give.
    private func openSSLVerdict(_ key: [UInt8], _ signature: [UInt8], _ message: [UInt8]) -> Bool {
        isCanonical(key, signature) && signature.withUnsafeBytes { signature in
            message.withUnsafeBytes { message in key.withUnsafeBytes { Ed25519.openSSLVerify(signature, over: message, key: $0) } }
        }
    }

    func testVerdictIsOpenSSLsOnEveryVector() throws {
        let vectors = try everyVector()
        XCTAssertEqual(vectors.count, 914 + 151 + 1024)
        var accepted = 0, smallOrder = 0
        for (index, v) in vectors.enumerated() {
            let key = try Ed25519.PublicKey(rawRepresentation: v.key)
            let verdict = key.isValidSignature(v.signature, for: v.message)
            let canonical = isCanonical(v.key, v.signature)
            XCTAssertEqual(verdict, openSSLVerdict(v.key, v.signature, v.message), "vector \(index)")
            if verdict { accepted += 1 }
            if canonical, v.key.withUnsafeBytes({ Ed25519.hasSmallOrder($0) }) || v.signature.prefix(32).withUnsafeBytes({ Ed25519.hasSmallOrder($0) }) {
                smallOrder += 1
            }
        }
        // The CCTV set's 172, Wycheproof's valid ones, all 1,024 djb lines.
        XCTAssertGreaterThan(accepted, 172 + 1024)
        // The fallback is exercised: CCTV has small-order keys and commitments.
        XCTAssertGreaterThan(smallOrder, 0)
    }

    func testLibsodiumAloneRefusesTheSmallOrderSignaturesOpenSSLAccepts() throws {
        // Why the fallback exists: without it these verdicts would change.
        var differing = 0
        for v in try Vectors.jsonArray("crypto/cctv-ed25519/ed25519vectors.json") {
            let key = try v.hex("key"), signature = try v.hex("sig"), message = Array((v["msg"] as? String ?? "").utf8)
            guard try Ed25519.PublicKey(rawRepresentation: key).isValidSignature(signature, for: message) else { continue }
            if crypto_sign_verify_detached(signature, message, UInt64(message.count), key) != 0 {
                differing += 1
                XCTAssertTrue(key.withUnsafeBytes { Ed25519.hasSmallOrder($0) } || signature.prefix(32).withUnsafeBytes { Ed25519.hasSmallOrder($0) })
            }
        }
        XCTAssertGreaterThan(differing, 0)
    }

    /// The table's eight encodings (each y; both signs of x where x ≠ 0) are distinct points
    /// whose eightfold multiple is the identity: the whole torsion subgroup, which has eight
    /// elements. Points of large order are not in it.
    func testSmallOrderTableIsTheEightPointsOfSmallOrder() throws {
        _ = sodium_init()
        let identity = [1] + [UInt8](repeating: 0, count: 31)
        func double(_ p: [UInt8]) -> [UInt8] {
            var r = [UInt8](repeating: 0, count: 32)
            XCTAssertEqual(crypto_core_ed25519_add(&r, p, p), 0)
            return r
        }
        var points = Set<[UInt8]>()
        for y in Ed25519.smallOrderY {
            for negative in [false, true] {
                var encoding = y
                if negative { encoding[31] |= 0x80 }
                guard Ed25519.isValidPublicKeyEncoding(encoding) else { continue }
                XCTAssertEqual(double(double(double(encoding))), identity)
                XCTAssertTrue(encoding.withUnsafeBytes { Ed25519.hasSmallOrder($0) })
                points.insert(encoding)
            }
        }
        XCTAssertEqual(points.count, 8)
        for _ in 0..<64 {
            let key = Ed25519.PrivateKey().publicKey.rawRepresentation
            XCTAssertFalse(key.withUnsafeBytes { Ed25519.hasSmallOrder($0) })
        }
    }

    /// Valid signatures of random keys, then each with a small-order point added to R or to A
    /// (mixed-order points, which libsodium checks like any other), with L added to S, and
    /// with R's sign bit flipped: the verdict is OpenSSL's on every one.
    func testVerdictIsOpenSSLsOnMixedOrderAndMalleatedSignatures() throws {
        let torsion: [[UInt8]] = Ed25519.smallOrderY.flatMap { y -> [[UInt8]] in
            var negative = y
            negative[31] |= 0x80
            return [y, negative].filter { Ed25519.isValidPublicKeyEncoding($0) }
        }
        XCTAssertEqual(torsion.count, 8)
        func add(_ p: [UInt8], _ q: [UInt8]) -> [UInt8] {
            var r = [UInt8](repeating: 0, count: 32)
            XCTAssertEqual(crypto_core_ed25519_add(&r, p, q), 0)
            return r
        }
        // L = 2^252 + 27742317777372353535851937790883648493, little-endian.
        let order: [UInt8] = [0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10]
        var checked = 0, accepted = 0
        for round in 0..<40 {
            let privateKey = Ed25519.PrivateKey()
            let key = privateKey.publicKey.rawRepresentation
            let message = Array("mixed order \(round)".utf8)
            let signature = privateKey.signature(for: message)
            var variants: [(key: [UInt8], signature: [UInt8])] = [(key, signature)]
            for t in torsion {
                variants.append((key, add(Array(signature.prefix(32)), t) + signature.suffix(32)))
                variants.append((add(key, t), signature))
            }
            var s = Array(signature.suffix(32)), carry = 0
            for i in 0..<32 {
                let sum = Int(s[i]) + Int(order[i]) + carry
                s[i] = UInt8(sum & 0xff)
                carry = sum >> 8
            }
            variants.append((key, signature.prefix(32) + s))
            var flipped = signature
            flipped[31] ^= 0x80
            variants.append((key, flipped))
            for v in variants {
                let verdict = try Ed25519.PublicKey(rawRepresentation: v.key).isValidSignature(v.signature, for: message)
                XCTAssertEqual(verdict, openSSLVerdict(v.key, v.signature, message), "round \(round)")
                checked += 1
                if verdict { accepted += 1 }
            }
        }
        XCTAssertEqual(checked, 40 * 19)
        // The untouched signatures, and R + identity and A + identity (the same encodings).
        XCTAssertGreaterThanOrEqual(accepted, 40 * 3)
    }

    func testLibsodiumInUseVerifiesAsOpenSSLDoes() {
        // Otherwise OpenSSL answers alone: correct, but the server's figures halve.
        XCTAssertTrue(Ed25519.sodiumReady)
    }

    func testForgedSignaturesAndMessagesAreRefused() {
        let key = Ed25519.PrivateKey()
        var signature = key.signature(for: [1, 2, 3])
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: [1, 2, 4] as [UInt8]))
        signature[40] ^= 1
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: [1, 2, 3] as [UInt8]))
        XCTAssertTrue(key.publicKey.isValidSignature(key.signature(for: [UInt8]()), for: [UInt8]()), "empty message")
    }
}
