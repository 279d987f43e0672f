import TetherRTC
import TetherTestSupport
import TetherWire
import XCTest

/// `iceServers` URLs (RFC 7064/7065) as libnice can use them, and the agent refusing a list it
/// cannot (signaling.md §8).
final class ICEServerURLTests: XCTestCase {
    func testStunTurnAndTurnsURLsMapToLibnicesRelayTransports() throws {
        let cases: [(String, ICEServerURL.Scheme, String, UInt16, ICEServerURL.RelayTransport?)] = [
            ("stun:stun.cloudflare.com:3478", .stun, "stun.cloudflare.com", 3478, nil),
            ("stun:127.0.0.1", .stun, "127.0.0.1", 3478, nil),
            ("turn:turn.example.com:3478?transport=udp", .turn, "turn.example.com", 3478, .udp),
            ("turn:turn.example.com:3478?transport=tcp", .turn, "turn.example.com", 3478, .tcp),
            ("turn:turn.example.com", .turn, "turn.example.com", 3478, .udp),
            ("turns:turn.example.com:5349?transport=tcp", .turns, "turn.example.com", 5349, .tls),
            ("turns:turn.cloudflare.com:443?transport=tcp", .turns, "turn.cloudflare.com", 443, .tls),
            ("turns:turn.example.com", .turns, "turn.example.com", 5349, .tls),
            ("turn:[2001:db8::1]:3478?transport=udp", .turn, "2001:db8::1", 3478, .udp),
            ("TURN:Turn.Example.com:80?TRANSPORT=TCP", .turn, "Turn.Example.com", 80, .tcp),
        ]
        for (text, scheme, host, port, transport) in cases {
            let url = try ICEServerURL.parse(text)
            XCTAssertEqual(url.scheme, scheme, text)
            XCTAssertEqual(url.host, host, text)
            XCTAssertEqual(url.port, port, text)
            XCTAssertEqual(url.relayTransport, transport, text)
        }
    }

    func testMalformedAndUnsupportedURLsAreTold() {
        let cases: [(String, ICEServerURL.ParseError)] = [
            ("turn", .malformed), ("http://turn.example.com", .malformed), ("turn:", .malformed), ("turn:host:0", .malformed),
            ("turn:host:65536", .malformed), ("turn:host:12a", .malformed), ("turn:host:3478:1", .malformed), ("turn:ho st", .malformed),
            ("turn:host?transport=", .malformed), ("turn:host?proto=udp", .malformed), ("stun:host?transport=udp", .malformed),
            ("turn:[::1", .malformed), ("turn:[::1]x", .malformed), ("turn:user@host", .malformed),
            ("stuns:host", .unsupported("STUN over TLS")), ("turns:host?transport=udp", .unsupported("TURN over DTLS")),
            ("turn:host?transport=sctp", .unsupported("transport sctp")),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(thrownError { () throws(ICEServerURL.ParseError) in _ = try ICEServerURL.parse(text) }, expected, text)
        }
    }

    func agentError(_ servers: [ICEServer], relayOnly: Bool = false, localAddresses: [String] = []) -> ICEError? {
        do {
            try ICEAgent(ICEConfiguration(role: .controlling, servers: servers, relayOnly: relayOnly, localAddresses: localAddresses)) { _ in }.close()
            return nil
        } catch {
            return error
        }
    }

    func testAnAgentRefusesAServerListItCannotUseAndSkipsURLsLibniceDoesNotSupport() {
        let turn = ["turn:127.0.0.1:3478?transport=udp"]
        XCTAssertEqual(agentError([ICEServer(urls: ["turn:bad host"], username: "u", credential: "p")]), .malformedServerURL)
        XCTAssertEqual(agentError([ICEServer(urls: turn)]), .missingTURNCredentials)
        XCTAssertEqual(agentError([ICEServer(urls: turn, username: "u", credential: "")]), .missingTURNCredentials)
        XCTAssertEqual(agentError([ICEServer(urls: ["stun:127.0.0.1"])], relayOnly: true), .noRelayServer)
        XCTAssertEqual(agentError([ICEServer(urls: ["turns:127.0.0.1?transport=udp"], username: "u", credential: "p")], relayOnly: true), .noRelayServer,
                       "TURN over DTLS is skipped, leaving no relay")
        XCTAssertEqual(agentError(ICEServer.split(urls: Array(repeating: turn[0], count: 17), username: "u", credential: "p")), .tooManyServers)
        XCTAssertEqual(agentError([], localAddresses: ["localhost"]), .invalidLocalAddress)
        XCTAssertNil(agentError([ICEServer(urls: ["stuns:127.0.0.1", "stun:127.0.0.1:3478"]),
                                 ICEServer(urls: turn + ["turns:127.0.0.1:5349?transport=tcp"], username: "u", credential: "p")], relayOnly: true))
        XCTAssertNil(agentError([]), "no servers: host candidates only")
    }
}
