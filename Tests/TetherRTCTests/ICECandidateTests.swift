import TetherCall
import TetherRTC
import XCTest

/// The candidate attribute (RFC 8839 §5.1, RFC 6544 §4.5): read strictly, written back as read,
/// carried in `candidate` signals without the leading `a=`.
final class ICECandidateTests: XCTestCase {
    func testAServerReflexiveCandidateWithLibwebrtcExtensionsRoundTrips() throws {
        let text = "candidate:842163049 1 udp 1677729535 192.0.2.10 54321 typ srflx raddr 10.0.0.5 rport 54321 generation 0 ufrag EsAw network-id 1 network-cost 10"
        let candidate = try ICECandidate.parse(text)
        XCTAssertEqual(candidate.foundation, "842163049")
        XCTAssertEqual(candidate.componentID, 1)
        XCTAssertEqual(candidate.transport, .udp)
        XCTAssertEqual(candidate.priority, 1_677_729_535)
        XCTAssertEqual(candidate.connectionAddress, "192.0.2.10")
        XCTAssertEqual(candidate.port, 54321)
        XCTAssertEqual(candidate.type, .srflx)
        XCTAssertEqual(candidate.relatedAddress, "10.0.0.5")
        XCTAssertEqual(candidate.relatedPort, 54321)
        XCTAssertNil(candidate.tcpType)
        XCTAssertEqual(candidate.extensions, [.init(name: "generation", value: "0"), .init(name: "ufrag", value: "EsAw"),
                                              .init(name: "network-id", value: "1"), .init(name: "network-cost", value: "10")])
        XCTAssertEqual(candidate.attributeValue, text)
    }

    func testAnIPv6HostCandidateKeepsItsAddressAndIsWrittenInLowercase() throws {
        let candidate = try ICECandidate.parse("candidate:1 1 UDP 2122262783 2001:db8::1 50001 typ host")
        XCTAssertEqual(candidate.connectionAddress, "2001:db8::1")
        XCTAssertTrue(candidate.isIPv6)
        XCTAssertEqual(candidate.type, .host)
        XCTAssertEqual(candidate.attributeValue, "candidate:1 1 udp 2122262783 2001:db8::1 50001 typ host")
    }

    func testTCPCandidatesCarryTheirTCPType() throws {
        for (text, type) in [("candidate:2 1 TCP 1518280447 192.0.2.10 9 typ host tcptype active", ICECandidate.TCPType.active),
                             ("candidate:3 1 tcp 1518280446 192.0.2.10 50002 typ host tcptype passive generation 0", .passive),
                             ("candidate:4 1 tcp 1518280445 2001:db8::2 50003 typ srflx raddr 2001:db8::9 rport 50003 tcptype so", .so)] {
            let candidate = try ICECandidate.parse(text)
            XCTAssertEqual(candidate.transport, .tcp, text)
            XCTAssertEqual(candidate.tcpType, type, text)
            XCTAssertEqual(try ICECandidate.parse(candidate.attributeValue), candidate, text)
        }
        XCTAssertEqual(try ICECandidate.parse("candidate:3 1 tcp 1 192.0.2.10 50002 typ host tcptype passive generation 0").attributeValue,
                       "candidate:3 1 tcp 1 192.0.2.10 50002 typ host tcptype passive generation 0")
    }

    func testARelayCandidateNamesItsRelatedAddress() throws {
        let candidate = try ICECandidate.parse("candidate:3 1 udp 41885439 203.0.113.7 3478 typ relay raddr 198.51.100.2 rport 61000")
        XCTAssertEqual(candidate.type, .relay)
        XCTAssertEqual(candidate.relatedAddress, "198.51.100.2")
        XCTAssertEqual(candidate.relatedPort, 61000)
        XCTAssertEqual(candidate.attributeValue, "candidate:3 1 udp 41885439 203.0.113.7 3478 typ relay raddr 198.51.100.2 rport 61000")
    }

    /// The related address of a relayed candidate is this device as the TURN server saw it; a
    /// candidate of Tether's never names it (libwebrtc's `raddr 0.0.0.0 rport 0`).
    func testARelayCandidateIsSignalledWithItsRelatedAddressWithheld() throws {
        let relay = try ICECandidate.parse("candidate:2 1 udp 505414655 203.0.113.7 18627 typ relay raddr 198.51.100.2 rport 38254")
        XCTAssertEqual(relay.signalled.attributeValue, "candidate:2 1 udp 505414655 203.0.113.7 18627 typ relay raddr 0.0.0.0 rport 0")
        XCTAssertEqual(relay.callCandidate(sdpMid: "0", sdpMLineIndex: 0),
                       CallCandidate(candidate: "candidate:2 1 udp 505414655 203.0.113.7 18627 typ relay raddr 0.0.0.0 rport 0",
                                     sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertEqual(try ICECandidate.parse(relay.signalled.attributeValue), relay.signalled, "a peer reads it as any candidate")

        let v6 = try ICECandidate.parse("candidate:3 1 udp 505414655 2001:db8::7 18628 typ relay raddr 2001:db8:1::2 rport 38255")
        XCTAssertEqual(v6.signalled.attributeValue, "candidate:3 1 udp 505414655 2001:db8::7 18628 typ relay raddr :: rport 0",
                       "the unspecified address of the candidate's own family")
        let bare = ICECandidate(foundation: "4", transport: .udp, priority: 1, connectionAddress: "203.0.113.7", port: 18629, type: .relay)
        XCTAssertEqual(bare.signalled.attributeValue, "candidate:4 1 udp 1 203.0.113.7 18629 typ relay raddr 0.0.0.0 rport 0",
                       "always written, so no relayed candidate of Tether's differs from another by it")
        let tcp = try ICECandidate.parse("candidate:5 1 tcp 1 203.0.113.7 18630 typ relay raddr 198.51.100.2 rport 38256 tcptype passive")
        XCTAssertEqual(tcp.signalled.attributeValue, "candidate:5 1 tcp 1 203.0.113.7 18630 typ relay raddr 0.0.0.0 rport 0 tcptype passive")
    }

    /// Only relayed candidates hide a related address: a reflexive one's is its base, a host
    /// candidate offered beside it (and relay-only offers neither).
    func testOtherCandidatesAreSignalledAsTheyAre() throws {
        for text in ["candidate:1 1 udp 2122260223 192.0.2.1 50000 typ host",
                     "candidate:2 1 udp 1686052607 203.0.113.9 40000 typ srflx raddr 192.0.2.1 rport 50000",
                     "candidate:3 1 udp 1 203.0.113.9 40001 typ prflx raddr 192.0.2.1 rport 50001"] {
            let candidate = try ICECandidate.parse(text)
            XCTAssertEqual(candidate.signalled, candidate, text)
            XCTAssertEqual(candidate.callCandidate(sdpMid: "0", sdpMLineIndex: 0).candidate, text)
        }
    }

    func testKeywordsMatchInAnyCase() throws {
        let candidate = try ICECandidate.parse("CANDIDATE:a+/Z 2 UdP 4294967295 192.0.2.1 1 TYP Prflx RADDR 0.0.0.0 RPORT 0 Generation 0")
        XCTAssertEqual(candidate.componentID, 2)
        XCTAssertEqual(candidate.transport, .udp)
        XCTAssertEqual(candidate.priority, UInt32.max)
        XCTAssertEqual(candidate.type, .prflx)
        XCTAssertEqual(candidate.relatedAddress, "0.0.0.0")
        XCTAssertEqual(candidate.relatedPort, 0)
        XCTAssertEqual(candidate.extensions, [.init(name: "Generation", value: "0")], "extension names are kept as sent")
        XCTAssertEqual(try ICECandidate.parse("candidate:5 1 TCP 1 192.0.2.1 9 typ host TCPTYPE Active").tcpType, .active)
    }

    func testMalformedCandidatesAreRefusedNamingTheField() {
        let base = "candidate:1 1 udp 2122260223 192.0.2.1 50000 typ host"
        let cases: [(String, ICECandidate.ParseError)] = [
            ("", .notACandidate),
            ("a=" + base, .notACandidate),
            ("candidate:", .notACandidate),
            ("candidate:1 1 udp 2122260223 192.0.2.1 50000 typ", .notACandidate),
            (base.replacingOccurrences(of: "udp ", with: "udp  "), .notACandidate),
            (base + " ", .notACandidate),
            ("candidate:" + String(repeating: "f", count: 33) + " 1 udp 1 192.0.2.1 1 typ host", .invalid(.foundation)),
            ("candidate:a-b 1 udp 1 192.0.2.1 1 typ host", .invalid(.foundation)),
            ("candidate:1 0 udp 1 192.0.2.1 1 typ host", .invalid(.componentID)),
            ("candidate:1 257 udp 1 192.0.2.1 1 typ host", .invalid(.componentID)),
            ("candidate:1 1a udp 1 192.0.2.1 1 typ host", .invalid(.componentID)),
            ("candidate:1 1 u:p 1 192.0.2.1 1 typ host", .invalid(.transport)),
            ("candidate:1 1 udp 4294967296 192.0.2.1 1 typ host", .invalid(.priority)),
            ("candidate:1 1 udp -1 192.0.2.1 1 typ host", .invalid(.priority)),
            ("candidate:1 1 udp 1 1.2.3 1 typ host", .invalid(.connectionAddress)),
            ("candidate:1 1 udp 1 256.1.1.1 1 typ host", .invalid(.connectionAddress)),
            ("candidate:1 1 udp 1 fe80::1%eth0 1 typ host", .invalid(.connectionAddress)),
            ("candidate:1 1 udp 1 192.0.2.1 65536 typ host", .invalid(.port)),
            ("candidate:1 1 udp 1 192.0.2.1 1 type host", .invalid(.candidateType)),
            (base.replacingOccurrences(of: "typ host", with: "typ srflx raddr"), .invalid(.relatedAddress)),
            (base.replacingOccurrences(of: "typ host", with: "typ srflx raddr x:y rport 1"), .invalid(.relatedAddress)),
            (base.replacingOccurrences(of: "typ host", with: "typ srflx raddr 10.0.0.1 rport 99999"), .invalid(.relatedPort)),
            (base + " generation", .invalid(.candidateExtension)),
            (base + " generation 0 raddr 10.0.0.1", .invalid(.candidateExtension)),
            (base + " network-id \u{e9}", .invalid(.candidateExtension)),
            (base.replacingOccurrences(of: "udp", with: "tcp"), .missingTCPType),
            (base + " tcptype passive", .tcpTypeOnUDP),
            (base.replacingOccurrences(of: "udp", with: "tcp") + " tcptype both", .invalid(.tcpType)),
            (base.replacingOccurrences(of: "udp", with: "tcp") + " tcptype active tcptype passive", .invalid(.tcpType)),
        ]
        for (text, error) in cases {
            XCTAssertThrowsError(try ICECandidate.parse(text), text) { XCTAssertEqual($0 as? ICECandidate.ParseError, error, text) }
            XCTAssertFalse(error.isUnusable, text)
        }
    }

    /// Tether resolves neither DNS nor mDNS on the ICE path, so hostnames are unusable rather
    /// than malformed, as are transports and types it has no use for.
    func testHostnamesAndUnknownTransportsOrTypesAreUnusable() {
        let cases: [(String, ICECandidate.ParseError)] = [
            ("candidate:1 1 udp 1 4b1b0fb1-7f1c-4a5e-9b5c-0a5d3f0c6e2a.local 50000 typ host", .unresolvableAddress("4b1b0fb1-7f1c-4a5e-9b5c-0a5d3f0c6e2a.local")),
            ("candidate:1 1 udp 1 turn.example.com 3478 typ relay", .unresolvableAddress("turn.example.com")),
            ("candidate:1 1 sctp 1 192.0.2.1 1 typ host", .unsupportedTransport("sctp")),
            ("candidate:1 1 udp 1 192.0.2.1 1 typ nat", .unsupportedType("nat")),
        ]
        for (text, error) in cases {
            XCTAssertThrowsError(try ICECandidate.parse(text), text) { XCTAssertEqual($0 as? ICECandidate.ParseError, error, text) }
            XCTAssertTrue(error.isUnusable, text)
        }
    }

    func testACandidateSignalCarriesTheAttributeWithoutItsLeadingA() throws {
        let candidate = ICECandidate(foundation: "1", transport: .udp, priority: 2_122_260_223, connectionAddress: "192.0.2.1", port: 50000,
                                     type: .host)
        let signal = candidate.callCandidate(sdpMid: "0", sdpMLineIndex: 0)
        XCTAssertEqual(signal, CallCandidate(candidate: "candidate:1 1 udp 2122260223 192.0.2.1 50000 typ host", sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertEqual(try ICECandidate(signal), candidate)
        XCTAssertThrowsError(try ICECandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))) {
            XCTAssertEqual($0 as? ICECandidate.ParseError, .notACandidate)
        }
    }
}
