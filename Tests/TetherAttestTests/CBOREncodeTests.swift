import TetherAttest
import TetherWire
import XCTest
import TetherEncoding

/// The encoder writes RFC 8949's preferred serialisation: shortest heads, definite lengths.
final class CBOREncodeTests: XCTestCase {
    func testRFC8949AppendixAExamplesEncodeByteForByte() throws {
        let cases: [(CBOR, String)] = [
            (.unsigned(0), "00"), (.unsigned(23), "17"), (.unsigned(24), "1818"), (.unsigned(100), "1864"),
            (.unsigned(1000), "1903e8"), (.unsigned(1_000_000), "1a000f4240"), (.unsigned(1_000_000_000_000), "1b000000e8d4a51000"),
            (.unsigned(UInt64.max), "1bffffffffffffffff"), (.negative(0), "20"), (.negative(999), "3903e7"),
            (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"), (.text(""), "60"), (.text("IETF"), "6449455446"),
            (.text("ü"), "62c3bc"), (.array([]), "80"), (.array([.unsigned(1), .array([.unsigned(2), .unsigned(3)])]), "8201820203"),
            (.map([.init(key: .text("a"), value: .unsigned(1)), .init(key: .text("b"), value: .array([.unsigned(2), .unsigned(3)]))]),
             "a26161016162820203"),
            (.tagged(1, .unsigned(1_363_896_240)), "c11a514b67b0"), (.simple(20), "f4"), (.simple(22), "f6"), (.simple(255), "f8ff"),
            (.float(1.1), "fb3ff199999999999a"),
        ]
        for (value, hex) in cases {
            XCTAssertEqual(Hex.encode(value.encoded), hex, "\(value)")
            XCTAssertEqual(try CBORDecoder().decode(value.encoded), value, "round trip of \(hex)")
        }
    }

    func testAnAttestationShapedMapPassesTheStrictProfile() throws {
        let object = CBOR.map([
            .init(key: .text("fmt"), value: .text("apple-appattest")),
            .init(key: .text("attStmt"), value: .map([.init(key: .text("x5c"), value: .array([.bytes([UInt8](repeating: 1, count: 300))]))])),
            .init(key: .text("authData"), value: .bytes([UInt8](repeating: 2, count: 70_000))),
        ])
        XCTAssertEqual(try CBORDecoder(profile: .appAttest).decode(object.encoded), object)
    }
}
