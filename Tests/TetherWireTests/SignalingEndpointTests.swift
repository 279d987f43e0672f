import TetherTestSupport
import TetherWire
import XCTest

/// The signaling endpoint rules of signaling.md §3.5, each refusal by its own input.
final class SignalingEndpointTests: XCTestCase {
    private func refusal(_ text: String, allowLoopbackWS: Bool = false) -> SignalingEndpointError? {
        thrownError { () throws(SignalingEndpointError) in _ = try SignalingEndpoint(text, allowLoopbackWS: allowLoopbackWS) }
    }

    private func assertRefused(_ text: String, _ expected: SignalingEndpointError, allowLoopbackWS: Bool = false,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(refusal(text, allowLoopbackWS: allowLoopbackWS), expected, text, file: file, line: line)
    }

    func testWSSWithAHostAndThePathSignalIsAccepted() throws {
        let endpoint = try SignalingEndpoint("wss://signal.example.com/signal")
        XCTAssertEqual(endpoint.url, "wss://signal.example.com/signal")
        XCTAssertEqual(endpoint.host, "signal.example.com")
        XCTAssertNil(endpoint.port)
        XCTAssertTrue(endpoint.isSecure)
        XCTAssertFalse(endpoint.isLoopback)
        XCTAssertEqual(try SignalingEndpoint("wss://cryptext-signaling.davidcantonnadales.workers.dev/signal").host,
                       "cryptext-signaling.davidcantonnadales.workers.dev")
        XCTAssertEqual(try SignalingEndpoint("wss://h/signal").url, "wss://h/signal")
        XCTAssertEqual(try SignalingEndpoint("wss://203.0.113.7/signal").host, "203.0.113.7")
    }

    func testAPortIsAllowedAndKeptEvenWhenItIsTheDefault() throws {
        XCTAssertEqual(try SignalingEndpoint("wss://h:443/signal").url, "wss://h:443/signal")
        XCTAssertEqual(try SignalingEndpoint("wss://h:8443/signal").port, 8443)
        XCTAssertEqual(try SignalingEndpoint("wss://h:65535/signal").port, 65535)
        XCTAssertEqual(try SignalingEndpoint("wss://h:0443/signal").url, "wss://h:443/signal")
        for bad in ["wss://h:/signal", "wss://h:0/signal", "wss://h:65536/signal", "wss://h:100000/signal",
                    "wss://h:-1/signal", "wss://h:44a/signal", "wss://h:443:443/signal"] {
            assertRefused(bad, .port)
        }
    }

    /// RFC 3986: scheme and host are case-insensitive; they are lowercased in the canonical URL.
    /// The path is not: `/Signal` is another resource.
    func testSchemeAndHostAreCaseInsensitiveAndCanonicalisedThePathIsNot() throws {
        let endpoint = try SignalingEndpoint("WSS://H/signal")
        XCTAssertEqual(endpoint.url, "wss://h/signal")
        XCTAssertEqual(try SignalingEndpoint("Wss://Signal.Example.COM:8443/signal").url, "wss://signal.example.com:8443/signal")
        XCTAssertEqual(try SignalingEndpoint("WSS://H/signal"), try SignalingEndpoint("wss://h/signal"))
        assertRefused("wss://h/Signal", .path)
        assertRefused("wss://h/SIGNAL", .path)
    }

    func testThePathMustBeExactlySignal() {
        for bad in ["wss://h", "wss://h/", "wss://h/signal/", "wss://h//signal", "wss://h/signal/x", "wss://h/signals",
                    "wss://h/x/signal", "wss://h/%73ignal", "wss://h/signa%6C", "wss://h/./signal", "wss://h/signal;x"] {
            assertRefused(bad, .path)
        }
    }

    func testNoCredentialsNoQueryNoFragment() {
        assertRefused("wss://u@h/signal", .credentials)
        assertRefused("wss://u:p@h/signal", .credentials)
        assertRefused("wss://@h/signal", .credentials)
        assertRefused("wss://h:443/signal?", .query)
        assertRefused("wss://h/signal?x=1", .query)
        assertRefused("wss://h/signal#x", .fragment)
        assertRefused("wss://h/signal#", .fragment)
        assertRefused("wss://h/signal?#", .query)
    }

    func testOnlyWSSIsAcceptedUnlessLoopbackWSIsAllowed() throws {
        assertRefused("ws://example.com/signal", .plaintext)
        assertRefused("ws://127.0.0.1/signal", .plaintext)
        assertRefused("ws://example.com/signal", .plaintextToRemoteHost, allowLoopbackWS: true)
        for scheme in ["https", "http", "wsss", "w", "", "ftp"] {
            assertRefused("\(scheme)://h/signal", .scheme)
        }
        for bad in ["h/signal", "wss:/h/signal", "wss:h/signal", "//h/signal", "wss//h/signal"] {
            assertRefused(bad, .scheme)
        }
        // wss:// is always fine, allowed loopback ws or not.
        XCTAssertTrue(try SignalingEndpoint("wss://example.com/signal", allowLoopbackWS: true).isSecure)
    }

    /// Loopback is exactly 127.0.0.1, ::1 and localhost (§3.5), IPv6 in brackets.
    func testLoopbackWSIsTheThreeNamedHostsOnly() throws {
        for (text, url) in [("ws://127.0.0.1/signal", "ws://127.0.0.1/signal"), ("ws://127.0.0.1:8791/signal", "ws://127.0.0.1:8791/signal"),
                            ("ws://[::1]:8791/signal", "ws://[::1]:8791/signal"), ("ws://localhost/signal", "ws://localhost/signal"),
                            ("WS://LocalHost:1/signal", "ws://localhost:1/signal"), ("ws://[0:0:0:0:0:0:0:1]/signal", "ws://[::1]/signal")] {
            let endpoint = try SignalingEndpoint(text, allowLoopbackWS: true)
            XCTAssertEqual(endpoint.url, url)
            XCTAssertTrue(endpoint.isLoopback)
            XCTAssertFalse(endpoint.isSecure)
        }
        for remote in ["ws://127.0.0.2/signal", "ws://10.0.0.1/signal", "ws://localhost.example.com/signal",
                       "ws://[::2]/signal", "ws://[::ffff:127.0.0.1]/signal", "ws://0.0.0.0/signal"] {
            assertRefused(remote, .plaintextToRemoteHost, allowLoopbackWS: true)
        }
        XCTAssertTrue(try SignalingEndpoint("wss://[::1]/signal").isLoopback)
    }

    func testIPv6LiteralsAreBracketedValidAndCanonicalised() throws {
        let endpoint = try SignalingEndpoint("wss://[2001:DB8:0:0:0:0:0:1]:8443/signal")
        XCTAssertEqual(endpoint.url, "wss://[2001:db8::1]:8443/signal")
        XCTAssertEqual(endpoint.host, "2001:db8::1")
        XCTAssertEqual(endpoint.port, 8443)
        XCTAssertEqual(try SignalingEndpoint("wss://[::ffff:192.0.2.1]/signal").url, "wss://[::ffff:192.0.2.1]/signal")
        for bad in ["wss://::1/signal", "wss://[::1/signal", "wss://[]/signal", "wss://[::1%25eth0]/signal", "wss://[v1.x]/signal",
                    "wss://[1:2:3:4:5:6:7:8:9]/signal", "wss://[::1]x/signal", "wss://[:::1]/signal", "wss://[g::1]/signal"] {
            assertRefused(bad, .host)
        }
    }

    func testAHostIsRequiredAndMustBeAPlainNameOrAddress() {
        for bad in ["wss:///signal", "wss://:443/signal", "wss://h_x/signal", "wss://-h/signal", "wss://h-/signal", "wss://a..b/signal",
                    "wss://.h/signal", "wss://h./signal", "wss://h%2Ex/signal", "wss://h\\signal", "wss://h!/signal",
                    "wss://\(String(repeating: "a", count: 64))/signal"] {
            assertRefused(bad, .host)
        }
        XCTAssertNoThrow(try SignalingEndpoint("wss://\(String(repeating: "a", count: 63)).example/signal"))
    }

    /// Hosts a WHATWG parser would read as another IPv4 address than the text seems to say.
    func testNumericHostsMustBeStrictDottedQuads() {
        for bad in ["wss://127.1/signal", "wss://2130706433/signal", "wss://0x7f.0.0.1/signal", "wss://127.0.0.01/signal",
                    "wss://256.0.0.1/signal", "wss://1.2.3.4.5/signal", "wss://example.0x10/signal", "wss://example.1/signal"] {
            assertRefused(bad, .host)
        }
        XCTAssertNoThrow(try SignalingEndpoint("wss://1example.com/signal"))
        XCTAssertNoThrow(try SignalingEndpoint("wss://0.0.0.0/signal"))
    }

    func testSpacesControlAndNonASCIICharactersAreRefusedUntrimmed() {
        for bad in [" wss://h/signal", "wss://h/signal ", "wss://h/signal\n", "wss://h/sig nal", "wss://bücher.example/signal", "wss://h/signal\u{0}"] {
            assertRefused(bad, .invalidCharacter)
        }
        XCTAssertNoThrow(try SignalingEndpoint("wss://xn--bcher-kva.example/signal"))
    }

    func testEachRefusalSaysWhatIsWrong() {
        XCTAssertEqual(SignalingEndpointError.path.description, "the signaling endpoint's path must be exactly /signal")
        XCTAssertEqual(SignalingEndpointError.plaintext.description, "the signaling endpoint must use wss:// (ws:// is unencrypted)")
        XCTAssertTrue(SignalingEndpointError.query.description.contains("no query"))
    }
}
