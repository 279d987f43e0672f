import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

final class Base64Tests: XCTestCase {
    private let rfc4648 = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]

    func testStandardEncodingAndStrictDecodingMatchRFC4648() throws {
        for (plain, encoded) in rfc4648 {
            XCTAssertEqual(Base64.encode(Array(plain.utf8)), encoded)
            XCTAssertEqual(try Base64.decode(encoded), Array(plain.utf8))
        }
        XCTAssertThrowsError(try Base64.decode("Zg"), "strict decoding requires padding")
        XCTAssertThrowsError(try Base64.decode("Zm9v\n"))
        XCTAssertThrowsError(try Base64.decode("Zm-v"))
        XCTAssertThrowsError(try Base64.decode("Z==="))
        XCTAssertThrowsError(try Base64.decode("Zg=a"))
    }

    func testForgivingDecodeFollowsWHATWG() throws {
        for (plain, encoded) in rfc4648 {
            XCTAssertEqual(try Base64.decodeForgiving(encoded), Array(plain.utf8))
            XCTAssertEqual(try Base64.decodeForgiving(encoded.replacingOccurrences(of: "=", with: "")), Array(plain.utf8), "padding optional")
        }
        XCTAssertEqual(try Base64.decodeForgiving(" Zm9v\tYmFy\r\n"), Array("foobar".utf8), "ASCII whitespace ignored")
        XCTAssertEqual(try Base64.decodeForgiving("Zm 9v Yg = ="), Array("foob".utf8))
        XCTAssertThrowsError(try Base64.decodeForgiving("Zm9v-_"), "base64url characters are invalid") {
            XCTAssertEqual($0 as? Base64.Failure, .invalidCharacter)
        }
        XCTAssertThrowsError(try Base64.decodeForgiving("Zm9vY"), "a length of 1 mod 4 cannot be decoded") {
            XCTAssertEqual($0 as? Base64.Failure, .invalidLength)
        }
        XCTAssertThrowsError(try Base64.decodeForgiving("YQ="), "padding only counts on a multiple of four")
        XCTAssertThrowsError(try Base64.decodeForgiving("Zg=a"))
        XCTAssertThrowsError(try Base64.decodeForgiving("Zg==="))
        XCTAssertThrowsError(try Base64.decodeForgiving("Zm9v\u{a0}"), "non-ASCII whitespace is not stripped")
        XCTAssertEqual(try Base64.decodeForgiving(""), [])
    }

    func testBase64URLWithoutPadding() throws {
        XCTAssertEqual(Base64.encodeURL([0xfb, 0xff, 0xbe, 0x00]), "-_--AA")
        XCTAssertEqual(Base64.encode([0xfb, 0xff, 0xbe, 0x00]), "+/++AA==")
        XCTAssertEqual(try Base64.decodeURL("-_--AA"), [0xfb, 0xff, 0xbe, 0x00])
        XCTAssertEqual(try Base64.decodeURL("-_--AA=="), [0xfb, 0xff, 0xbe, 0x00])
        XCTAssertThrowsError(try Base64.decodeURL("+/++AA"))
        XCTAssertThrowsError(try Base64.decodeURL("-_--AA="))
    }

    /// b64std canonical is defined as `encode(decode(s)) == s` (signaling.md §13.1); the decoder
    /// checks it without re-encoding, so the definition is checked over every short string of
    /// a small alphabet holding each kind of trouble (leftover bits, padding in the middle,
    /// a foreign character), and over random byte strings' encodings.
    func testCanonicalDecodingAcceptsExactlyWhatReEncodesToItself() throws {
        var checked = 0
        for (length, alphabet) in [(0, "")] + (1...5).map({ ($0, "AQgh+/=-") }) + [(8, "Ah=-")] {
            let symbols = Array(alphabet.utf8)
            var digits = [Int](repeating: 0, count: length)
            while true {
                let text = String(decoding: digits.map { symbols[$0] }, as: UTF8.self)
                let reEncodes = (try? Base64.decode(text)).map { Base64.encode($0) == text } ?? false
                XCTAssertEqual((try? Base64.decodeCanonical(text)) != nil, reEncodes, text)
                checked += 1
                guard let last = digits.lastIndex(where: { $0 < symbols.count - 1 }) else { break }
                digits[last] += 1
                for i in (last + 1)..<length { digits[i] = 0 }
            }
        }
        XCTAssertEqual(checked, 1 + 8 + 64 + 512 + 4_096 + 32_768 + 65_536)
        var generator = SystemRandomNumberGenerator()
        for count in 0..<200 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            XCTAssertEqual(try Base64.decodeCanonical(Base64.encode(bytes)), bytes)
            XCTAssertEqual(try Base64.decodeURL(Base64.encodeURL(bytes)), bytes)
        }
    }

    func testAPNsProviderTokenHeaderAndClaims() throws {
        let example = try Vectors.json("jwt-apns/apns-provider-token-example.json")
        let derived = example["derived"] as? [String: Any] ?? [:]
        XCTAssertEqual(Base64.encodeURL(Array((derived["header_compact_json"] as? String ?? "").utf8)), derived["header_b64url"] as? String)
        XCTAssertEqual(Base64.encodeURL(Array((derived["claims_compact_json"] as? String ?? "").utf8)), derived["claims_b64url"] as? String)
        XCTAssertEqual(Base64.encodeURL(Array(#"{"alg":"ES256","kid":"FGHIJ67890"}"#.utf8)), "eyJhbGciOiJFUzI1NiIsImtpZCI6IkZHSElKNjc4OTAifQ")
        let rfc = try Vectors.json("jwt-apns/rfc7515-a3-es256.json")
        XCTAssertEqual(Base64.encodeURL(Array((rfc["protected_header_utf8"] as? String ?? "").utf8)), rfc["protected_b64url"] as? String)
        XCTAssertEqual(Base64.encodeURL(Array((rfc["payload_utf8"] as? String ?? "").utf8)), rfc["payload_b64url"] as? String)
    }
}

final class HexTests: XCTestCase {
    func testLowercaseOutputAndEitherCaseInput() throws {
        XCTAssertEqual(Hex.encode([0x00, 0xab, 0xff]), "00abff")
        XCTAssertEqual(try Hex.decode("00ABff"), [0x00, 0xab, 0xff])
        XCTAssertThrowsError(try Hex.decode("abc")) { XCTAssertEqual($0 as? Hex.Failure, .oddLength) }
        XCTAssertThrowsError(try Hex.decode("zz")) { XCTAssertEqual($0 as? Hex.Failure, .invalidCharacter) }
        XCTAssertTrue(Hex.isLowercase("0123456789abcdef", count: 16))
        XCTAssertFalse(Hex.isLowercase("0123456789ABCDEF", count: 16))
        XCTAssertFalse(Hex.isLowercase("0123", count: 5))
    }
}

final class CanonicalEncodingTests: XCTestCase {
    func testSharedVector() {
        XCTAssertEqual(Hex.encode(CanonicalEncoding.encode(domain: "test", fields: [[0x01, 0x02], Array("hi".utf8)])),
                       "0000000474657374000000020102000000026869")
    }

    func testBoundariesDomainsAndEmptyFieldsAreUnambiguous() {
        XCTAssertNotEqual(CanonicalEncoding.encode(domain: "d", fields: [Array("AB".utf8), Array("C".utf8)]),
                          CanonicalEncoding.encode(domain: "d", fields: [Array("A".utf8), Array("BC".utf8)]))
        XCTAssertNotEqual(CanonicalEncoding.encode(domain: "d1", fields: [[1]]), CanonicalEncoding.encode(domain: "d2", fields: [[1]]))
        XCTAssertNotEqual(CanonicalEncoding.encode(domain: "d", fields: []), CanonicalEncoding.encode(domain: "d", fields: [[]]))
        XCTAssertEqual(CanonicalEncoding.encode(domain: "", fields: []), [0, 0, 0, 0])
    }
}

final class RoomNameTests: XCTestCase {
    func testCrossLanguageRoomNameAndBucketVectors() throws {
        let cases: [(rs: [UInt8], pid: String, name: String, bucket: Int)] = [
            ([UInt8](repeating: 0xab, count: 32), "0123456789abcdef", "611c035897cf71eebc08e531616a3470f666cd001532e1bd4957dd762efae220", 57888),
            (Array(0..<32), "companion", "de5613dbe578aeb70a6885a481e0252dbc4bb279bcb120235a38cda8a999d07e", 53374),
            ([UInt8](repeating: 0xff, count: 32), "z", "28396c094119a4f1948f69a5ab2971d8126fdc11c040a280b912f1a48f56bc08", 48136),
            (try Hex.decode("605a725d2a4adfeeb1a29e17edd621c1b7593ee8cdbc44ac6c4ab6e2f805d23c"), "0123456789abcdef",
             "029e3efc3d0422b4622a9e3625ee7a8834a4f67a1789c3531b84ba1fdeb2c4b5", 50357),
        ]
        for c in cases {
            let room = RoomName(responderStaticKey: c.rs, pairingID: c.pid)
            XCTAssertEqual(room.hex, c.name)
            XCTAssertEqual(room.bucket, c.bucket)
            XCTAssertEqual(RoomName(header: c.name), room)
        }
    }

    func testHeaderValidationAcceptsOnly64LowercaseHexDigits() {
        let valid = String(repeating: "a", count: 64)
        XCTAssertNotNil(RoomName(header: valid))
        XCTAssertNil(RoomName(header: String(repeating: "A", count: 64)))
        XCTAssertNil(RoomName(header: String(repeating: "a", count: 63)))
        XCTAssertNil(RoomName(header: String(repeating: "a", count: 65)))
        XCTAssertNil(RoomName(header: String(repeating: "a", count: 63) + "g"))
        XCTAssertNil(RoomName(header: String(repeating: "a", count: 63) + "\u{FF10}"), "fullwidth digit")
        XCTAssertNil(RoomName(header: ""))
    }

    func testLogTagIsOpaqueAndNamesNeverPrint() throws {
        let room = try XCTUnwrap(RoomName(header: String(repeating: "a", count: 64)))
        XCTAssertEqual(room.logTag, "ffe054fe")
        XCTAssertEqual("\(room)", "room ffe054fe")
        XCTAssertFalse("\(room)".contains(room.hex))
    }
}

final class Digest256Tests: XCTestCase {
    func testBytesHexAndTheirPrefixesMatchTheGenericEncodersForEveryBytePosition() throws {
        // Each byte distinct, so a byte landing in the wrong word or position shows.
        let bytes: [UInt8] = (0..<32).map { UInt8(($0 * 37 + 11) & 0xff) }
        let digest = Digest256(bytes)
        XCTAssertEqual(digest.bytes, bytes)
        XCTAssertEqual(digest.hex(), Hex.encode(bytes))
        XCTAssertEqual(digest.hexUTF8(), Array(Hex.encode(bytes).utf8))
        for prefix in 0...32 {
            XCTAssertEqual(digest.hex(prefix: prefix), Hex.encode(bytes.prefix(prefix)))
        }
        XCTAssertEqual(Digest256(lowercaseHex: Hex.encode(bytes)), digest)
        XCTAssertEqual(Digest256([UInt8](repeating: 0xff, count: 32)).hex(), String(repeating: "f", count: 64))
    }

    func testHexInputIsExactly64LowercaseDigits() {
        let valid = String(repeating: "0123456789abcdef", count: 4)
        XCTAssertNotNil(Digest256(lowercaseHex: valid))
        for invalid in [String(valid.dropLast()), valid + "0", valid.uppercased(), String(valid.dropLast()) + "g", String(valid.dropLast()) + "\u{FF10}",
                        String(valid.dropLast(2)) + "\u{e9}", valid + "\u{0}", ""] {
            XCTAssertNil(Digest256(lowercaseHex: invalid), invalid)
        }
    }
}

final class PunycodeTests: XCTestCase {
    func testClientTableAndRFC3492Samples() {
        XCTAssertEqual(Punycode.displayHost("bücher"), "xn--bcher-kva")
        XCTAssertEqual(Punycode.displayHost("münchen"), "xn--mnchen-3ya")
        XCTAssertEqual(Punycode.displayHost("münchen.example.com"), "xn--mnchen-3ya.example.com")
        XCTAssertEqual(Punycode.displayHost("relay.example.com"), "relay.example.com")
        // RFC 3492 §7.1 (A) Arabic (Egyptian) and (B) Chinese (simplified).
        let arabic = "\u{0644}\u{064A}\u{0647}\u{0645}\u{0627}\u{0628}\u{062A}\u{0643}\u{0644}\u{0645}\u{0648}\u{0634}\u{0639}\u{0631}\u{0628}\u{064A}\u{061F}"
        XCTAssertEqual(Punycode.encode(arabic.unicodeScalars.map(\.value)), "egbpdaj6bu4bxfgehfvwxn")
        let chinese = "\u{4ED6}\u{4EEC}\u{4E3A}\u{4EC0}\u{4E48}\u{4E0D}\u{8BF4}\u{4E2D}\u{6587}"
        XCTAssertEqual(Punycode.encode(chinese.unicodeScalars.map(\.value)), "ihqwcrb4cv8a8dqg056pqjye")
        // A Cyrillic lookalike of the official host never shows in Unicode (value: CPython codec).
        XCTAssertEqual(Punycode.displayHost("rеlay.iterm2.com"), "xn--rlay-v4d.iterm2.com")
    }
}
