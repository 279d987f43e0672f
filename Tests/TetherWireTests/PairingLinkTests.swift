import Foundation
import TetherWire
import XCTest
import TetherEncoding

final class PairingLinkTests: XCTestCase {
    private let rs = "YFpyXSpK3-6xop4X7dYhwbdZPujNvESsbEq24vgF0jw"
    private let proto = "Noise_XK_25519_ChaChaPoly_BLAKE2s"
    private var example: String {
        "iterm2://pair?v=1&proto=\(proto)&rs=\(rs)&pid=0123456789abcdef&relay=https://relay.example.com"
    }

    private func link(_ query: String) -> String { "iterm2://pair?\(query)" }

    private func assertRejects(_ text: String, _ expected: PairingLinkError, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try PairingLink.parse(text), file: file, line: line) {
            XCTAssertEqual($0 as? PairingLinkError, expected, text, file: file, line: line)
        }
    }

    func testV1ExampleParsesAndRoundTripsByteForByte() throws {
        let parsed = try PairingLink.parse(example)
        XCTAssertEqual(parsed.transport, .direct(relayOrigin: "https://relay.example.com"))
        XCTAssertEqual(Hex.encode(parsed.responderStaticKey), "605a725d2a4adfeeb1a29e17edd621c1b7593ee8cdbc44ac6c4ab6e2f805d23c")
        XCTAssertEqual(parsed.pairingID, "0123456789abcdef")
        XCTAssertEqual(parsed.url, example)
        XCTAssertEqual(try PairingLink.parse(parsed.url), parsed)
    }

    func testV2LinkCarriesResolverAndIgnoresRelay() throws {
        let text = link("v=2&proto=\(proto)&rs=\(rs)&pid=p1&resolver=https://resolver.example.com/shardmap.json&relay=https://evil.example")
        let parsed = try PairingLink.parse(text)
        XCTAssertEqual(parsed.transport, .resolved(resolverURL: "https://resolver.example.com/shardmap.json"))
        XCTAssertEqual(parsed.url, link("v=2&proto=\(proto)&rs=\(rs)&pid=p1&resolver=https://resolver.example.com/shardmap.json"))
        XCTAssertEqual(try PairingLink.parse(parsed.url), parsed)
        assertRejects(link("v=2&proto=\(proto)&rs=\(rs)&pid=p1&relay=https://relay.example.com"), .invalidResolver)
    }

    func testV1IgnoresResolverAndWithoutRelayHasNoTransport() throws {
        let parsed = try PairingLink.parse(link("v=1&proto=\(proto)&rs=\(rs)&pid=p1&resolver=https://resolver.example.com/x"))
        XCTAssertEqual(parsed.transport, .direct(relayOrigin: nil))
        XCTAssertNil(parsed.disclosedHost)
        XCTAssertEqual(parsed.url, link("v=1&proto=\(proto)&rs=\(rs)&pid=p1"))
    }

    func testRejectionCasesInRuleOrder() {
        assertRejects("https://relay.example.com/pair?v=1", .malformedURL)
        assertRejects("iterm2://unpair?v=1&proto=\(proto)&rs=\(rs)&pid=p", .malformedURL)
        assertRejects("not a url at all", .malformedURL)
        assertRejects(link("v=3&proto=\(proto)&rs=\(rs)&pid=p"), .unsupportedVersion(found: "3"))
        assertRejects(link("proto=\(proto)&rs=\(rs)&pid=p"), .unsupportedVersion(found: nil))
        assertRejects(link("v=one&proto=Noise_NN&rs=&pid="), .unsupportedVersion(found: "one"), )
        assertRejects(link("v=1&proto=Noise_NN_25519_ChaChaPoly_BLAKE2s&rs=\(rs)&pid=p"),
                      .unsupportedProtocol(found: "Noise_NN_25519_ChaChaPoly_BLAKE2s"))
        assertRejects(link("v=1&rs=\(rs)&pid=p"), .unsupportedProtocol(found: nil))
        assertRejects(link("v=1&proto=\(proto)&rs=AAECAwQFBgcICQoLDA0ODw&pid=p"), .invalidResponderKey) // 16 bytes
        assertRejects(link("v=1&proto=\(proto)&rs=!!!!&pid=p"), .invalidResponderKey)
        assertRejects(link("v=1&proto=\(proto)&pid=p"), .invalidResponderKey)
        assertRejects(link("v=1&proto=\(proto)&rs=\(rs)"), .missingPairingID)
        assertRejects(link("v=1&proto=\(proto)&rs=\(rs)&pid="), .missingPairingID)
        assertRejects(link("v=1&proto=\(proto)&rs=\(rs)&pid=p&relay=http://relay.example.com"), .invalidRelay)
        // The version is checked before anything else.
        assertRejects(link("v=9&proto=bad&rs=bad"), .unsupportedVersion(found: "9"))
    }

    func testFirstQueryItemWinsAndStandardAlphabetKeysAreAccepted() throws {
        let parsed = try PairingLink.parse(link("v=1&v=3&proto=\(proto)&rs=\(rs)&pid=first&pid=second&relay=https://a.example&relay=https://b.example"))
        XCTAssertEqual(parsed.pairingID, "first")
        XCTAssertEqual(parsed.transport, .direct(relayOrigin: "https://a.example"))
        let standard = rs.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        XCTAssertEqual(try PairingLink.parse(link("v=1&proto=\(proto)&rs=\(standard.replacingOccurrences(of: "+", with: "%2B"))&pid=p")).responderStaticKey,
                       try PairingLink.parse(example).responderStaticKey)
    }

    func testRelayOriginCanonicalisation() {
        XCTAssertEqual(RelayOrigin.canonicalize("https://relay.example.com"), "https://relay.example.com")
        XCTAssertEqual(RelayOrigin.canonicalize("https://relay.example.com:8443"), "https://relay.example.com:8443")
        XCTAssertEqual(RelayOrigin.canonicalize("https://relay.example.com:443"), "https://relay.example.com:443", "explicit port kept")
        XCTAssertEqual(RelayOrigin.canonicalize("https://relay.example.com/"), "https://relay.example.com")
        XCTAssertEqual(RelayOrigin.canonicalize("HTTPS://relay.example.com"), "https://relay.example.com", "scheme is case-insensitive")
        for bad in ["http://relay.example.com", "https://relay.example.com/evil", "https://relay.example.com?x=1", "https://relay.example.com#frag",
                    "https://user:pw@relay.example.com", "https://", "https://user@relay.example.com", "relay.example.com", "",
                    "https://relay.example.com?", "wss://relay.example.com"] {
            XCTAssertNil(RelayOrigin.canonicalize(bad), bad)
            let encoded = bad.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            XCTAssertThrowsError(try PairingLink.parse(link("v=1&proto=\(proto)&rs=\(rs)&pid=p&relay=\(encoded)")), bad) {
                XCTAssertEqual($0 as? PairingLinkError, .invalidRelay)
            }
        }
    }

    func testHTTPIsAcceptedOnlyForLoopbackHostsAndOnlyWhenAllowed() throws {
        XCTAssertNil(RelayOrigin.canonicalize("http://127.0.0.1:8080"), "never by default")
        XCTAssertEqual(RelayOrigin.canonicalize("http://127.0.0.1:8080/", allowLoopbackHTTP: true), "http://127.0.0.1:8080")
        XCTAssertEqual(RelayOrigin.canonicalize("http://localhost:1", allowLoopbackHTTP: true), "http://localhost:1")
        XCTAssertEqual(RelayOrigin.canonicalize("http://[::1]:9", allowLoopbackHTTP: true), "http://[::1]:9")
        XCTAssertEqual(RelayOrigin.canonicalize("http://127.1.2.3", allowLoopbackHTTP: true), "http://127.1.2.3")
        for refused in ["http://relay.example.com", "http://10.0.0.1:80", "http://127.0.0.1.example.com", "http://128.0.0.1",
                        "http://127.0.0.256", "http://user@127.0.0.1", "http://127.0.0.1/path", "ftp://127.0.0.1"] {
            XCTAssertNil(RelayOrigin.canonicalize(refused, allowLoopbackHTTP: true), refused)
        }
        XCTAssertEqual(RelayOrigin.canonicalizeResolver("http://127.0.0.1:9/shardmap.json", allowLoopbackHTTP: true), "http://127.0.0.1:9/shardmap.json")
        XCTAssertNil(RelayOrigin.canonicalizeResolver("http://resolver.example/shardmap.json", allowLoopbackHTTP: true))
        let local = "iterm2://pair?v=1&proto=\(proto)&rs=\(rs)&pid=p&relay=http://127.0.0.1:8080"
        XCTAssertThrowsError(try PairingLink.parse(local)) { XCTAssertEqual($0 as? PairingLinkError, .invalidRelay) }
        XCTAssertEqual(try PairingLink.parse(local, allowLoopbackHTTP: true).transport, .direct(relayOrigin: "http://127.0.0.1:8080"))
        // A loopback resolver over http names loopback owners over http, anything else over https.
        XCTAssertEqual(RelayOrigin.origin(forShardHost: "127.0.0.1:7", resolverURL: "http://127.0.0.1:9/m.json"), "http://127.0.0.1:7")
        XCTAssertEqual(RelayOrigin.origin(forShardHost: "relay-b.example", resolverURL: "http://127.0.0.1:9/m.json"), "https://relay-b.example")
        XCTAssertEqual(RelayOrigin.origin(forShardHost: "127.0.0.1:7", resolverURL: "https://resolver.example/m.json"), "https://127.0.0.1:7")
    }

    /// What a link's origin canonicalises to is stored and canonicalised again when the pairing
    /// record loads: a host that does not read back as itself is refused when the link is read,
    /// not found corrupt on the next start (found by fuzzing, Fuzz/PairingLink).
    func testAnOriginWhoseCanonicalFormDoesNotReadBackIsRefused() throws {
        for host in ["a%20b.example", "b%C2%BCcher.example", "lec0-a%73623\u{2BE}12-AB12d-AB12-AB12"] {
            XCTAssertNil(RelayOrigin.canonicalize("https://" + host), host)
            XCTAssertNil(RelayOrigin.canonicalizeResolver("https://\(host)/shardmap.json"), host)
            let encoded = ("https://" + host).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            XCTAssertThrowsError(try PairingLink.parse(link("v=1&proto=\(proto)&rs=\(rs)&pid=p&relay=\(encoded)")), host) {
                XCTAssertEqual($0 as? PairingLinkError, .invalidRelay)
            }
        }
        for origin in ["https://relay.example.com", "https://xn--bcher-kva.example:8443", "https://[::1]:4443", "https://Relay.Example"] {
            let canonical = try XCTUnwrap(RelayOrigin.canonicalize(origin), origin)
            XCTAssertEqual(RelayOrigin.canonicalize(canonical), canonical, origin)
        }
    }

    func testResolverURLKeepsItsPathVerbatim() {
        XCTAssertEqual(RelayOrigin.canonicalizeResolver("https://resolver.example.com/shardmap.json"), "https://resolver.example.com/shardmap.json")
        XCTAssertEqual(RelayOrigin.canonicalizeResolver("https://resolver.example.com/maps/"), "https://resolver.example.com/maps/")
        XCTAssertEqual(RelayOrigin.canonicalizeResolver("https://resolver.example.com:8443/a%20b.json"), "https://resolver.example.com:8443/a%20b.json")
        XCTAssertEqual(RelayOrigin.canonicalizeResolver("https://resolver.example.com"), "https://resolver.example.com")
        for bad in ["http://resolver.example.com/x", "https://resolver.example.com/x?y=1", "https://resolver.example.com/x#f",
                    "https://u:p@resolver.example.com/x", "https:///x"] {
            XCTAssertNil(RelayOrigin.canonicalizeResolver(bad), bad)
        }
    }

    func testResolverWithEncodedPathRoundTripsThroughTheLink() throws {
        let original = try PairingLink(transport: .resolved(resolverURL: "https://resolver.example.com/a%20b/"),
                                       responderStaticKey: [UInt8](repeating: 1, count: 32), pairingID: "p")
        let parsed = try PairingLink.parse(original.url)
        XCTAssertEqual(parsed, original)
        XCTAssertEqual(parsed.transport, .resolved(resolverURL: "https://resolver.example.com/a%20b/"))
    }

    func testHostDisclosureUsesPunycodeAndSkipsOfficialHosts() throws {
        let key = [UInt8](repeating: 1, count: 32)
        XCTAssertNil(try PairingLink(transport: .direct(relayOrigin: "https://relay.iterm2.com"), responderStaticKey: key, pairingID: "p").disclosedHost)
        XCTAssertNil(try PairingLink(transport: .resolved(resolverURL: "https://resolver.iterm2.com/shardmap.json"), responderStaticKey: key, pairingID: "p").disclosedHost)
        XCTAssertEqual(try PairingLink(transport: .direct(relayOrigin: "https://relay.example.com:8443"), responderStaticKey: key, pairingID: "p").disclosedHost,
                       "relay.example.com:8443")
        XCTAssertEqual(try PairingLink(transport: .direct(relayOrigin: "https://münchen.example.com"), responderStaticKey: key, pairingID: "p").disclosedHost,
                       "xn--mnchen-3ya.example.com")
        XCTAssertEqual(try PairingLink(transport: .resolved(resolverURL: "https://relay.iterm2.com/shardmap.json"), responderStaticKey: key, pairingID: "p").disclosedHost,
                       "relay.iterm2.com", "the relay host is not the official resolver")
    }

    func testRevision11MigrationMovesOnlyTheOfficialDirectRelay() throws {
        let key = [UInt8](repeating: 2, count: 32)
        let official = try PairingLink(transport: .direct(relayOrigin: "https://relay.iterm2.com"), responderStaticKey: key, pairingID: "p")
        let migrated = official.migratedToResolver()
        XCTAssertEqual(migrated.transport, .resolved(resolverURL: "https://resolver.iterm2.com/shardmap.json"))
        XCTAssertEqual(migrated.responderStaticKey, key)
        XCTAssertEqual(migrated.pairingID, "p")
        let custom = try PairingLink(transport: .direct(relayOrigin: "https://relay.example.com"), responderStaticKey: key, pairingID: "p")
        XCTAssertEqual(custom.migratedToResolver(), custom)
        let withPort = try PairingLink(transport: .direct(relayOrigin: "https://relay.iterm2.com:443"), responderStaticKey: key, pairingID: "p")
        XCTAssertEqual(withPort.migratedToResolver(), withPort)
    }

    func testPairingIDsAreSixteenLowercaseHexCharacters() {
        XCTAssertEqual(PairingLink.makePairingID(randomBytes: Array(0..<8)), "0001020304050607")
        XCTAssertThrowsError(try PairingLink(transport: .direct(relayOrigin: nil), responderStaticKey: [1], pairingID: "p"))
        XCTAssertThrowsError(try PairingLink(transport: .direct(relayOrigin: "http://x"), responderStaticKey: [UInt8](repeating: 1, count: 32), pairingID: "p"))
    }
}
