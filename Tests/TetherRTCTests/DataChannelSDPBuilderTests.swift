import TetherCall
import TetherRTC
import XCTest

/// Tether's offers and answers (RFC 9429 §5.2.1/§5.3.1 for one data section): exact text with
/// CRLF line endings, the same for the same inputs, read back to the same value.
final class DataChannelSDPBuilderTests: XCTestCase {
    func testTheOfferIsExactlyTheDataOnlyJSEPOffer() {
        XCTAssertEqual(SDPFixtures.offer.text, SDPFixtures.sdp(SDPFixtures.offerLines))
        XCTAssertEqual(SDPFixtures.offer.text, SDPFixtures.offer.text, "deterministic")
        XCTAssertEqual(SDPFixtures.offer.description, SDPFixtures.offer.text)
    }

    func testTheAnswerTakesTheOffersMidAndProtocolAndSaysActive() throws {
        let offerText = SDPFixtures.sdp([
            "v=0", "o=mozilla...THIS_IS_SDPARTA-99.0 4539716011340588024 0 IN IP4 0.0.0.0", "s=-", "t=0 0",
            "a=fingerprint:sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"),
            "a=group:BUNDLE data", "a=ice-options:trickle", "a=msid-semantic:WMS *",
            "m=application 9 TCP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=sendrecv",
            "a=ice-pwd:b2e4d1ff0bd5cbd5a7a8d2a4a0d1c0f3", "a=ice-ufrag:9d3b2f1a", "a=mid:data", "a=setup:actpass",
            "a=sctp-port:5000", "a=max-message-size:1073741823",
        ])
        let offer = try DataChannelSDP.parse(offerText, as: .offer)
        let answer = DataChannelSDP.answer(to: offer, origin: SDPFixtures.answerOrigin, ice: SDPFixtures.answerICE,
                                           fingerprint: SDPFixtures.fingerprint)
        XCTAssertEqual(answer.text, SDPFixtures.sdp([
            "v=0",
            "o=- 1234567890 3 IN IP4 0.0.0.0",
            "s=-",
            "t=0 0",
            "a=group:BUNDLE data",
            "a=ice-options:trickle",
            "m=application 9 TCP/DTLS/SCTP webrtc-datachannel",
            "c=IN IP4 0.0.0.0",
            "a=mid:data",
            "a=ice-ufrag:aN5w",
            "a=ice-pwd:ZYXWVUTSRQPONMLKJIHGFEDCBA",
            "a=fingerprint:" + SDPFixtures.fingerprintValue,
            "a=setup:active",
            "a=sctp-port:5000",
            "a=max-message-size:65536",
        ]))
        XCTAssertEqual(try DataChannelSDP.parseAnswer(answer.text, to: offer), answer)
    }

    func testCandidatesAreListedAndTheDefaultOneIsTheRelayOrElseTheBestHost() throws {
        let host = try ICECandidate.parse("candidate:1 1 udp 2122260223 192.0.2.1 50000 typ host")
        let hostV6 = try ICECandidate.parse("candidate:2 1 udp 2122262783 2001:db8::1 50001 typ host")
        let tcp = try ICECandidate.parse("candidate:3 1 tcp 1518280447 192.0.2.1 9 typ host tcptype active")
        let relay = try ICECandidate.parse("candidate:4 1 udp 41885439 203.0.113.7 3478 typ relay raddr 192.0.2.1 rport 50000")
        let offer = DataChannelSDP.offer(origin: SDPFixtures.origin, ice: SDPFixtures.ice, fingerprint: SDPFixtures.fingerprint,
                                         candidates: [host, hostV6, tcp, relay], endOfCandidates: true)
        var lines = SDPFixtures.offerLines
        lines[6] = "m=application 3478 UDP/DTLS/SCTP webrtc-datachannel"
        lines[7] = "c=IN IP4 203.0.113.7"
        lines += [host, hostV6, tcp, relay.signalled].map { "a=" + $0.attributeValue } + ["a=end-of-candidates"]
        XCTAssertEqual(offer.text, SDPFixtures.sdp(lines))
        XCTAssertEqual(try DataChannelSDP.parse(offer.text, as: .offer), offer)

        let v6 = DataChannelSDP.offer(origin: SDPFixtures.origin, ice: SDPFixtures.ice, fingerprint: SDPFixtures.fingerprint,
                                      candidates: [host, hostV6, tcp])
        XCTAssertTrue(v6.text.contains("\r\nm=application 50001 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP6 2001:db8::1\r\n"),
                      "among hosts the highest priority; TCP never")
        XCTAssertEqual(try DataChannelSDP.parse(v6.text, as: .offer), v6)
    }

    /// What a relay-only device writes: its relayed candidates with their related address
    /// withheld, the TURN server's relayed address as the default, and nothing of its own in
    /// `o=`, `c=` or any attribute; before any candidate, 9 and 0.0.0.0.
    func testARelayOnlyDescriptionNamesNothingOfTheDevice() throws {
        let device = "192.0.2.1", port = "50000"
        let relay = try ICECandidate.parse("candidate:4 1 udp 41885439 203.0.113.7 3478 typ relay raddr \(device) rport \(port)")
        let offer = DataChannelSDP.offer(origin: SDPFixtures.origin, ice: SDPFixtures.ice, fingerprint: SDPFixtures.fingerprint,
                                         candidates: [relay], endOfCandidates: true)
        let answer = DataChannelSDP.answer(to: offer, origin: SDPFixtures.answerOrigin, ice: SDPFixtures.answerICE,
                                           fingerprint: SDPFixtures.fingerprint, candidates: [relay])
        for description in [offer, answer] {
            let lines = description.text.split(separator: "\r\n")
            XCTAssertTrue(lines.contains("a=candidate:4 1 udp 41885439 203.0.113.7 3478 typ relay raddr 0.0.0.0 rport 0"), description.text)
            XCTAssertTrue(lines.contains("c=IN IP4 203.0.113.7"), description.text)
            XCTAssertTrue(lines.contains { $0.hasPrefix("o=") && $0.hasSuffix(" IN IP4 0.0.0.0") }, description.text)
            XCTAssertFalse(description.text.contains(device), description.text)
            XCTAssertFalse(description.text.contains(port), description.text)
            XCTAssertEqual(description.candidates, [relay.signalled])
        }
        XCTAssertEqual(try DataChannelSDP.parse(offer.text, as: .offer), offer)

        let trickled = DataChannelSDP.offer(origin: SDPFixtures.origin, ice: SDPFixtures.ice, fingerprint: SDPFixtures.fingerprint)
        XCTAssertTrue(trickled.text.contains("\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n"), trickled.text)
    }

    func testBuiltDescriptionsReadBackToThemselves() throws {
        let offer = SDPFixtures.offer
        XCTAssertEqual(try DataChannelSDP.parse(offer.text, as: .offer), offer)
        let answer = DataChannelSDP.answer(to: offer, origin: SDPFixtures.answerOrigin, ice: SDPFixtures.answerICE,
                                           fingerprint: SDPFixtures.fingerprint, maxMessageSize: 0)
        let read = try DataChannelSDP.parseAnswer(answer.text, to: offer)
        XCTAssertEqual(read, answer)
        XCTAssertEqual(read.setup, .active)
        XCTAssertNil(read.messageSizeLimit, "0 is no limit")
        XCTAssertEqual(offer.messageSizeLimit, 65536)
    }

    func testARandomOriginHasItsTopBitClearAndVersionZero() {
        let first = DataChannelSDP.Origin.random(), second = DataChannelSDP.Origin.random()
        XCTAssertNotEqual(first.sessionID, second.sessionID)
        for origin in [first, second] {
            XCTAssertLessThanOrEqual(origin.sessionID, UInt64(Int64.max))
            XCTAssertEqual(origin.sessionVersion, 0)
            XCTAssertEqual(origin.username, "-")
        }
    }

    func testCandidateSignalsNameTheDataSection() throws {
        let offer = SDPFixtures.offer
        let candidate = try ICECandidate.parse("candidate:1 1 udp 2122260223 192.0.2.1 50000 typ host")
        XCTAssertEqual(offer.callCandidate(candidate), CallCandidate(candidate: candidate.attributeValue, sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertEqual(offer.endOfCandidatesSignal, CallCandidate(candidate: "", sdpMid: "0", sdpMLineIndex: 0))
        XCTAssertTrue(offer.isForDataSection(CallCandidate(candidate: "", sdpMid: "0", sdpMLineIndex: nil)))
        XCTAssertTrue(offer.isForDataSection(CallCandidate(candidate: "", sdpMid: nil, sdpMLineIndex: 0)))
        XCTAssertFalse(offer.isForDataSection(CallCandidate(candidate: "", sdpMid: "1", sdpMLineIndex: 0)), "the mid decides")
        XCTAssertFalse(offer.isForDataSection(CallCandidate(candidate: "", sdpMid: nil, sdpMLineIndex: 1)))
    }
}
