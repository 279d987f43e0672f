import TetherAttest
import TetherWire
import XCTest
import TetherEncoding

final class CBORTests: XCTestCase {
    private func decode(_ hex: String, _ profile: CBORDecoder.Profile = .general, limits: CBORDecoder.Limits = .init()) throws -> CBOR {
        try CBORDecoder(limits: limits, profile: profile).decode(try Hex.decode(hex))
    }

    private func error(_ hex: String, _ profile: CBORDecoder.Profile = .general, limits: CBORDecoder.Limits = .init()) -> CBORError? {
        do {
            _ = try decode(hex, profile, limits: limits)
            return nil
        } catch let error as CBORError { return error } catch { return nil }
    }

    /// RFC 8949 Appendix A.
    func testTheRFCExamples() throws {
        let cases: [(String, CBOR)] = [
            ("00", .unsigned(0)), ("17", .unsigned(23)), ("1818", .unsigned(24)), ("1903e8", .unsigned(1000)),
            ("1a000f4240", .unsigned(1_000_000)), ("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
            ("1bffffffffffffffff", .unsigned(.max)), ("20", .negative(0)), ("3863", .negative(99)),
            ("3bffffffffffffffff", .negative(.max)),
            ("f90000", .float(0)), ("f93c00", .float(1)), ("f97bff", .float(65504)), ("f90001", .float(5.960464477539063e-8)),
            ("f9c400", .float(-4)), ("fa47c35000", .float(100_000)), ("fb3ff199999999999a", .float(1.1)),
            ("f97c00", .float(.infinity)), ("f4", .simple(20)), ("f5", .simple(21)), ("f6", .simple(22)), ("f7", .simple(23)),
            ("f0", .simple(16)), ("f8ff", .simple(255)),
            ("c074323031332d30332d32315432303a30343a30305a", .tagged(0, .text("2013-03-21T20:04:00Z"))),
            ("d74401020304", .tagged(23, .bytes([1, 2, 3, 4]))),
            ("40", .bytes([])), ("4401020304", .bytes([1, 2, 3, 4])), ("60", .text("")), ("6161", .text("a")),
            ("62c3bc", .text("ü")), ("64f0908591", .text("𐅑")),
            ("80", .array([])), ("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            ("8301820203820405", .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])),
            ("a0", .map([])),
            ("a201020304", .map([.init(key: .unsigned(1), value: .unsigned(2)), .init(key: .unsigned(3), value: .unsigned(4))])),
            ("a26161016162820203", .map([.init(key: .text("a"), value: .unsigned(1)),
                                         .init(key: .text("b"), value: .array([.unsigned(2), .unsigned(3)]))])),
            ("5f42010243030405ff", .bytes([1, 2, 3, 4, 5])), ("7f657374726561646d696e67ff", .text("streaming")),
            ("9fff", .array([])), ("9f018202039f0405ffff", .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])),
            ("bf61610161629f0203ffff", .map([.init(key: .text("a"), value: .unsigned(1)),
                                            .init(key: .text("b"), value: .array([.unsigned(2), .unsigned(3)]))])),
        ]
        for (hex, expected) in cases { XCTAssertEqual(try decode(hex), expected, hex) }
        guard case let .float(nan) = try decode("f97e00") else { return XCTFail("NaN") }
        XCTAssertTrue(nan.isNaN)
    }

    func testMalformedInputIsAnErrorNeverACrash() {
        XCTAssertEqual(error(""), .truncated)
        XCTAssertEqual(error("18"), .truncated)
        XCTAssertEqual(error("1a0000"), .truncated)
        XCTAssertEqual(error("44010203"), .truncated)
        XCTAssertEqual(error("83 0102".replacingOccurrences(of: " ", with: "")), .truncated)
        XCTAssertEqual(error("9f01"), .truncated, "an indefinite array without its break")
        XCTAssertEqual(error("0000"), .trailingBytes(1))
        XCTAssertEqual(error("1c"), .reservedAdditionalInformation(28))
        XCTAssertEqual(error("ff"), .unexpectedBreak)
        XCTAssertEqual(error("62c328"), .invalidUTF8)
        XCTAssertEqual(error("a2616101616102"), .duplicateKey)
        XCTAssertEqual(error("5f4101610261ff"), .badIndefiniteChunk, "a text chunk inside a byte string")
        XCTAssertEqual(error("5f5f4101ffff"), .badIndefiniteChunk, "nested indefinite chunks")
        XCTAssertEqual(error("f818"), .reservedAdditionalInformation(24), "two-byte simple below 32")
        XCTAssertEqual(error("1f"), .reservedAdditionalInformation(31), "an indefinite integer")
    }

    func testHostileCountsAndDepthsAreBounded() {
        // A declared 2^32-element array in five bytes must not allocate anything large.
        XCTAssertEqual(error("9b0000000100000000"), .tooLong)
        XCTAssertEqual(error("9a00100000"), .truncated, "a million elements declared, none present")
        XCTAssertEqual(error("5b00000000ffffffff"), .tooLong)
        XCTAssertEqual(error(String(repeating: "81", count: 17) + "00"), .tooDeep)
        XCTAssertNotNil(try? decode(String(repeating: "81", count: 16) + "00"))
        var few = CBORDecoder.Limits()
        few.maxItems = 3
        XCTAssertEqual(error("83010203", limits: few), .tooManyItems)
        XCTAssertEqual(error(String(repeating: "d8", count: 1) + String(repeating: "18d8", count: 20) + "1800"), .tooDeep, "nested tags")
    }

    func testTheAppAttestProfileAcceptsOnlyItsSubset() {
        XCTAssertNotNil(try? decode("a2636b657944010203046161820102", .appAttest), "text keys, bytes, arrays, unsigned")
        XCTAssertEqual(error("20", .appAttest), .notInProfile("negative integer"))
        XCTAssertEqual(error("c000", .appAttest), .notInProfile("tag"))
        XCTAssertEqual(error("f5", .appAttest), .notInProfile("float or simple value"))
        XCTAssertEqual(error("fb3ff199999999999a", .appAttest), .notInProfile("float or simple value"))
        XCTAssertEqual(error("9fff", .appAttest), .notInProfile("indefinite length"))
        XCTAssertEqual(error("5f4101ff", .appAttest), .notInProfile("indefinite length"))
        XCTAssertEqual(error("a10102", .appAttest), .notInProfile("non-text map key"))
        XCTAssertEqual(error("0000", .appAttest), .trailingBytes(1))
    }

    func testMapLookupByTextKey() throws {
        let value = try decode("a26161016162820203")
        XCTAssertEqual(value["a"], .unsigned(1))
        XCTAssertEqual(value["b"]?.arrayValue?.count, 2)
        XCTAssertNil(value["c"])
        XCTAssertNil(CBOR.unsigned(1)["a"])
    }
}
