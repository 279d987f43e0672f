import TetherCrypto
import TetherTestSupport
import XCTest

/// RFC 8032 §5.1.3 point decoding, which an ID must pass before it can be selected
/// (signaling.md §3.1). The expected answers for small y were computed independently with
/// Python's integers (Euler's criterion on (y² − 1)/(d·y² + 1) mod 2^255 − 19).
final class Ed25519PointDecodingTests: XCTestCase {
    /// The little-endian encoding of a small y, with the sign bit of x if `negative`.
    private func encoding(y: UInt8, negative: Bool = false) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        bytes[0] = y
        if negative { bytes[31] |= 0x80 }
        return bytes
    }

    func testSmallYDecodeExactlyWhenXSquaredIsASquare() {
        let points: [UInt8] = [0, 1, 3, 4, 5, 6, 9, 10, 14, 15, 16, 18, 19]
        let nonPoints: [UInt8] = [2, 7, 8, 11, 12, 13, 17]
        for y in points {
            XCTAssertTrue(Ed25519.isValidPublicKeyEncoding(encoding(y: y)), "y = \(y)")
        }
        for y in nonPoints {
            XCTAssertFalse(Ed25519.isValidPublicKeyEncoding(encoding(y: y)), "y = \(y)")
            XCTAssertFalse(Ed25519.isValidPublicKeyEncoding(encoding(y: y, negative: true)), "y = \(y), negative x")
        }
        // The other root of a point is a point; x = 0 (y = 1) has no negative root.
        XCTAssertTrue(Ed25519.isValidPublicKeyEncoding(encoding(y: 3, negative: true)))
        XCTAssertFalse(Ed25519.isValidPublicKeyEncoding(encoding(y: 1, negative: true)))
    }

    func testNonCanonicalAndWrongLengthEncodingsAreRefused() {
        // y = p, a non-canonical spelling of y = 0 (which is a point).
        var yEqualsP = [UInt8](repeating: 0xff, count: 32)
        yEqualsP[0] = 0xed
        yEqualsP[31] = 0x7f
        XCTAssertFalse(Ed25519.isValidPublicKeyEncoding(yEqualsP))
        XCTAssertFalse(Ed25519.isValidPublicKeyEncoding([UInt8](repeating: 3, count: 31)))
        XCTAssertFalse(Ed25519.isValidPublicKeyEncoding([UInt8](repeating: 3, count: 33)))
    }

    func testEveryGeneratedAndRFC8032PublicKeyIsAPoint() throws {
        for _ in 0..<200 {
            XCTAssertTrue(Ed25519.isValidPublicKeyEncoding(Ed25519.PrivateKey().publicKey.rawRepresentation))
        }
        let alice = try hexBytes("BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")
        XCTAssertTrue(Ed25519.isValidPublicKeyEncoding(alice))
    }

    /// Every CCTV key is a curve point; those flagged non-canonical are refused for their spelling.
    func testCCTVKeysDecodeUnlessNonCanonical() throws {
        let vectors = try Vectors.jsonArray("crypto/cctv-ed25519/ed25519vectors.json")
        XCTAssertEqual(vectors.count, 914)
        for v in vectors {
            let flags = Set(v["flags"] as? [String] ?? [])
            XCTAssertEqual(Ed25519.isValidPublicKeyEncoding(try v.hex("key")), !flags.contains("non_canonical_A"),
                           "number \(v["number"] ?? "") flags \(flags.sorted())")
        }
    }
}
