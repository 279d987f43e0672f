import TetherTestSupport
@testable import TetherWire
import XCTest

/// The contact link of signaling.md §3.4: building, the spec's example, and every refusal.
final class ContactLinkTests: XCTestCase {
    /// The §12 vector identity's ID (Alice), a valid curve point.
    static let alice = SignalingID(canonical: "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")!
    static let example = "cryptext://contact/v2/BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5?relay=wss://signal.example.com/signal"

    private func refusal(_ text: String, allowLoopbackWS: Bool = false) -> ContactLinkError? {
        thrownError { () throws(ContactLinkError) in _ = try ContactLink.parse(text, allowLoopbackWS: allowLoopbackWS) }
    }

    private func assertRefused(_ text: String, _ expected: ContactLinkError, allowLoopbackWS: Bool = false,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(refusal(text, allowLoopbackWS: allowLoopbackWS), expected, text, file: file, line: line)
    }

    private let base = "cryptext://contact/v2/BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5"

    func testTheSpecExampleIsBuiltAndParsedExactly() throws {
        let link = ContactLink(id: Self.alice, relay: try SignalingEndpoint("wss://signal.example.com/signal"))
        XCTAssertEqual(link.url, Self.example)
        let parsed = try ContactLink.parse(Self.example)
        XCTAssertEqual(parsed, link)
        XCTAssertEqual(parsed.relay?.url, "wss://signal.example.com/signal")
    }

    func testALinkWithoutRelayRoundTrips() throws {
        let link = ContactLink(id: Self.alice)
        XCTAssertEqual(link.url, base)
        XCTAssertEqual(try ContactLink.parse(link.url), link)
        XCTAssertNil(try ContactLink.parse(link.url).relay)
    }

    /// Every byte but `A–Z a–z 0–9 - . _ ~ : /` is escaped, in uppercase hex, and decodes back.
    func testTheRelayIsPercentEncodedAsAQueryComponentAndRoundTrips() throws {
        let loopback = try SignalingEndpoint("ws://[::1]:8791/signal", allowLoopbackWS: true)
        let link = ContactLink(id: Self.alice, relay: loopback)
        XCTAssertEqual(link.url, base + "?relay=ws://%5B::1%5D:8791/signal")
        XCTAssertEqual(try ContactLink.parse(link.url, allowLoopbackWS: true), link)
        let ported = ContactLink(id: Self.alice, relay: try SignalingEndpoint("wss://a-b.example:8443/signal"))
        XCTAssertEqual(ported.url, base + "?relay=wss://a-b.example:8443/signal")
        XCTAssertEqual(try ContactLink.parse(ported.url), ported)
    }

    /// The encoder itself, on bytes no canonical endpoint has (so no link can show them).
    func testTheEncoderEscapesEveryOtherByteInUppercaseHex() throws {
        XCTAssertEqual(ContactLink.percentEncode("AZaz09-._~:/"), "AZaz09-._~:/")
        XCTAssertEqual(ContactLink.percentEncode("[]?#&=%+ @!ü\u{7F}"), "%5B%5D%3F%23%26%3D%25%2B%20%40%21%C3%BC%7F")
        let text = "wss://x/?a=b&c#d ü"
        XCTAssertEqual(try ContactLink.percentDecode(ArraySlice(ContactLink.percentEncode(text).utf8)), Array(text.utf8))
    }

    /// Other encoders escape more (JavaScript's encodeURIComponent escapes `:` and `/`); one
    /// decoding pass reads them all, in either hex case.
    func testParsersDecodeAnyEscapesOnce() throws {
        let link = try ContactLink.parse(base + "?relay=wss%3A%2F%2Fsignal.example.com%2fsignal")
        XCTAssertEqual(link.relay?.url, "wss://signal.example.com/signal")
        XCTAssertEqual(try ContactLink.parse(base + "?relay=ws%3a%2f%2f%5b%3a%3a1%5d%2fsignal", allowLoopbackWS: true).relay?.url, "ws://[::1]/signal")
        // Twice-encoded stays encoded once: `%2573ignal` is the path `/%73ignal`, which §3.5 refuses.
        assertRefused(base + "?relay=wss://h/%2573ignal", .relay(.path))
    }

    func testTheIDIsCanonicalisedFromEitherCase() throws {
        let lower = try ContactLink.parse(base.replacingOccurrences(of: "BC7CBCB5636375FA", with: "bc7cbcb5636375fa"))
        XCTAssertEqual(lower.id, Self.alice)
        XCTAssertEqual(lower.url, base)
    }

    func testTheSchemeMatchesInAnyCaseTheRestExactly() throws {
        XCTAssertEqual(try ContactLink.parse(base.replacingOccurrences(of: "cryptext:", with: "CrypText:")).id, Self.alice)
        for bad in [base.replacingOccurrences(of: "contact", with: "Contact"), base.replacingOccurrences(of: "/v2/", with: "/V2/"),
                    base.replacingOccurrences(of: "/v2/", with: "/v1/"), base.replacingOccurrences(of: "cryptext:", with: "cryptex:"),
                    base.replacingOccurrences(of: "://", with: ":/"), base.replacingOccurrences(of: "contact/v2/", with: "contact/v2//"),
                    "https://contact/v2/" + Self.alice.canonical, "cryptext://contact/" + Self.alice.canonical, "cryptext://contact/v2",
                    base + "/", base + "/extra", ""] {
            assertRefused(bad, .notAContactLink)
        }
    }

    func testLegacyInvalidAndNonPointIDsAreRefused() {
        assertRefused("cryptext://contact/v2/0123456789ABCDEF0123456789ABCDEF", .legacyID)
        assertRefused("cryptext://contact/v2/0123456789abcdef0123456789abcdef?relay=wss://h/signal", .legacyID)
        assertRefused("cryptext://contact/v2/", .invalidID)
        assertRefused(base + "00", .invalidID)
        assertRefused(String(base.dropLast()), .invalidID)
        assertRefused(base.replacingOccurrences(of: "BC7C", with: "BG7C"), .invalidID)
        assertRefused(base.replacingOccurrences(of: "v2/", with: "v2/CT2-"), .invalidID)
        assertRefused("cryptext://contact/v2/CT2-BC7C-BCB5-6363-75FA-1D82-434D-4667-24D9-2377-F53B-9806-95DD-49D2-6D0C-E122-05A5", .invalidID)
        assertRefused("cryptext://contact/v2/%42" + Self.alice.canonical.dropFirst(), .invalidID)
        // y = 2 (little-endian) has no x on the curve (signaling.md §3.1).
        assertRefused("cryptext://contact/v2/02" + String(repeating: "0", count: 62), .notAKey)
        // y = p: a non-canonical encoding.
        assertRefused("cryptext://contact/v2/ED" + String(repeating: "F", count: 60) + "7F", .notAKey)
    }

    func testParametersOtherThanOneRelayAreRefused() {
        assertRefused(base + "?", .malformedParameter)
        assertRefused(base + "?relay", .malformedParameter)
        assertRefused(base + "?=wss://h/signal", .malformedParameter)
        assertRefused(base + "?relay=wss://h/signal&", .malformedParameter)
        assertRefused(base + "?relay=wss://h/signal&&x=1", .malformedParameter)
        assertRefused(base + "?relay=wss://h/signal&relay=wss://h/signal", .duplicateRelay)
        assertRefused(base + "?relay=wss://a/signal&relay=wss://b/signal", .duplicateRelay)
        assertRefused(base + "?v=2", .unknownParameter("v"))
        assertRefused(base + "?relay=wss://h/signal&name=Alice", .unknownParameter("name"))
        assertRefused(base + "?Relay=wss://h/signal", .unknownParameter("Relay"))
        assertRefused(base + "?rel%61y=wss://h/signal", .unknownParameter("rel%61y"))
        assertRefused(base + "#x", .fragment)
        assertRefused(base + "?relay=wss://h/signal#x", .fragment)
        assertRefused(base + "?relay=wss://h/signal%23x", .relay(.fragment))
    }

    func testMalformedEscapesAndNonUTF8AreRefused() {
        for bad in ["%", "%4", "%G0", "%0G", "wss://h/signal%", "wss://h/signal%2"] {
            assertRefused(base + "?relay=" + bad, .percentEncoding)
        }
        assertRefused(base + "?relay=wss://h%FF/signal", .relayNotUTF8)
        assertRefused(base + "?relay=wss://h%C3/signal", .relayNotUTF8)
        // UTF-8 once decoded, but not ASCII: §3.5 refuses it.
        assertRefused(base + "?relay=wss://b%C3%BCcher.example/signal", .relay(.invalidCharacter))
        XCTAssertThrowsError(try ContactLink.parse(bytes: Array(base.utf8) + [0xFF])) { XCTAssertEqual($0 as? ContactLinkError, .notUTF8) }
        XCTAssertEqual(try ContactLink.parse(bytes: Array(Self.example.utf8)).relay?.host, "signal.example.com")
    }

    func testCharactersALinkCannotHoldAreRefusedUntrimmed() {
        for bad in [" " + base, base + " ", base + "\n", base + "?relay=wss://h/sig nal", base + "?relay=wss://h/signal\"",
                    base + "?relay=wss://[::1]/signal", base + "?relay=wss://h\\signal", base + "?relay=ü"] {
            assertRefused(bad, .invalidCharacter)
        }
    }

    /// The relay is validated by §3.5, with loopback ws only where the caller allows it.
    func testARelayThatFailsTheEndpointRulesRefusesTheLink() {
        assertRefused(base + "?relay=", .relay(.scheme))
        assertRefused(base + "?relay=https://h/signal", .relay(.scheme))
        assertRefused(base + "?relay=wss://h/Signal", .relay(.path))
        assertRefused(base + "?relay=wss://u@h/signal", .relay(.credentials))
        assertRefused(base + "?relay=wss://h/signal?", .relay(.query))
        assertRefused(base + "?relay=wss://h/signal%3Fx=1", .relay(.query))
        assertRefused(base + "?relay=wss://h/signal%20", .relay(.invalidCharacter))
        assertRefused(base + "?relay=ws://127.0.0.1:8791/signal", .relay(.plaintext))
        assertRefused(base + "?relay=ws://example.com/signal", .relay(.plaintextToRemoteHost), allowLoopbackWS: true)
        XCTAssertEqual(refusal(base + "?relay=ws://127.0.0.1:8791/signal", allowLoopbackWS: true), nil)
    }

    func testEachRefusalSaysWhatIsWrong() {
        XCTAssertEqual(ContactLinkError.legacyID.description,
                       "the contact link holds a legacy 128-bit ID: it names no key and cannot be called; ask for a new link")
        XCTAssertEqual(ContactLinkError.relay(.path).description,
                       "the contact link's relay is refused: the signaling endpoint's path must be exactly /signal")
        XCTAssertEqual(ContactLinkError.unknownParameter(String(repeating: "x", count: 50)).description,
                       "the contact link has an unknown parameter \(String(repeating: "x", count: 40))… (only relay is defined)")
    }
}
