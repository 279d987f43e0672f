import TetherRTC
import XCTest

/// Reading descriptions strictly: what is accepted (session-level attributes, bare LF, unknown
/// attributes, unusable candidates skipped) and every refusal with its line and problem.
final class DataChannelSDPParserTests: XCTestCase {
    typealias Problem = DataChannelSDP.ParseError.Problem

    /// Tether's offer with `edit` applied to its lines (0-based, as in `SDPFixtures.offerLines`).
    func offer(_ edit: (inout [String]) -> Void) -> String {
        var lines = SDPFixtures.offerLines
        edit(&lines)
        return SDPFixtures.sdp(lines)
    }

    func assertRefused(_ text: String, as type: DataChannelSDP.DescriptionType = .offer, line: Int, _ problem: Problem,
                       file: StaticString = #filePath, lineNumber: UInt = #line) {
        XCTAssertThrowsError(try DataChannelSDP.parse(text, as: type), file: file, line: lineNumber) {
            XCTAssertEqual($0 as? DataChannelSDP.ParseError, DataChannelSDP.ParseError(line: line, problem), file: file, line: lineNumber)
        }
    }

    func testBareLineFeedsAndAMissingFinalTerminatorAreAccepted() throws {
        let offer = SDPFixtures.offer
        XCTAssertEqual(try DataChannelSDP.parse(SDPFixtures.offerLines.joined(separator: "\n") + "\n", as: .offer), offer)
        XCTAssertEqual(try DataChannelSDP.parse(SDPFixtures.offerLines.joined(separator: "\r\n"), as: .offer), offer)
    }

    func testUnknownAttributesAreIgnoredAtBothLevels() throws {
        let text = offer { lines in
            lines.insert("a=msid-semantic:WMS *", at: 4)
            lines.insert("a=extmap-allow-mixed", at: 4)
            lines += ["a=sctpmap:5000 webrtc-datachannel 1024", "a=x-tether-unknown:anything at all", "a=sendrecv"]
        }
        XCTAssertEqual(try DataChannelSDP.parse(text, as: .offer), SDPFixtures.offer)
    }

    func testSessionLevelICEFingerprintAndSetupApplyUnlessTheSectionHasItsOwn() throws {
        let other = "sha-256 " + Array(repeating: "CD", count: 32).joined(separator: ":")
        let text = SDPFixtures.sdp([
            "v=0", "o=- 1 2 IN IP6 ::1", "s= ", "c=IN IP4 192.0.2.9", "t=0 0", "a=ice-ufrag:sess", "a=ice-pwd:sessionsessionsession22",
            "a=fingerprint:" + other, "a=setup:passive", "a=ice-lite", "a=ice-options:ice2",
            "m=application 4000 UDP/DTLS/SCTP webrtc-datachannel", "a=mid:d", "a=ice-ufrag:medi",
            "a=fingerprint:sha-384 " + Array(repeating: "0F", count: 48).joined(separator: ":"),
            "a=fingerprint:" + SDPFixtures.fingerprintValue, "a=ice-options:trickle", "a=sctp-port:5001",
        ])
        let answer = try DataChannelSDP.parse(text, as: .answer)
        XCTAssertEqual(answer.origin, DataChannelSDP.Origin(sessionID: 1, sessionVersion: 2))
        XCTAssertEqual(answer.connectionAddress, "192.0.2.9", "the session's c= line")
        XCTAssertEqual(answer.port, 4000)
        XCTAssertEqual(answer.ice.ufrag, "medi", "the section's ufrag wins")
        XCTAssertEqual(answer.ice.pwd, "sessionsessionsession22")
        XCTAssertEqual(answer.fingerprints, [SDPFixtures.fingerprint], "the section's fingerprints replace the session's; sha-384 is read past")
        XCTAssertEqual(answer.setup, .passive)
        XCTAssertTrue(answer.iceLite)
        XCTAssertEqual(answer.iceOptions, ["ice2", "trickle"])
        XCTAssertFalse(answer.bundled)
        XCTAssertEqual(answer.sctpPort, 5001)
        XCTAssertEqual(answer.maxMessageSize, 65536, "RFC 8841's default when absent")
    }

    func testUnusableCandidatesAreSkippedAndUsableOnesKept() throws {
        let text = offer { lines in
            lines += ["a=candidate:1 1 udp 2122260223 4b1b0fb1-7f1c-4a5e-9b5c-0a5d3f0c6e2a.local 50000 typ host",
                      "a=candidate:2 2 udp 2122260222 192.0.2.1 50001 typ host",
                      "a=candidate:3 1 udp 2122260221 192.0.2.1 50002 typ host generation 0",
                      "a=candidate:4 1 dccp 2122260220 192.0.2.1 50003 typ host",
                      "a=end-of-candidates"]
        }
        let read = try DataChannelSDP.parse(text, as: .offer)
        XCTAssertEqual(read.candidates.map(\.foundation), ["3"])
        XCTAssertTrue(read.endOfCandidates)
    }

    func testSizeLineCountAndCharacterLimitsAreEnforced() {
        assertRefused(offer { $0.append("a=x-pad:" + String(repeating: "p", count: DataChannelSDP.maxBytes)) }, line: 0, .tooLarge)
        assertRefused(offer { $0 += Array(repeating: "a=x-pad:p", count: DataChannelSDP.maxLines) }, line: 0, .tooManyLines)
        assertRefused(offer { $0[2] = "s=-\u{0}" }, line: 3, .controlCharacter)
        assertRefused(offer { $0[2] = "s=-\rx" }, line: 3, .controlCharacter)
        assertRefused(offer { $0[2] = "s=\t-" }, line: 3, .controlCharacter)
        assertRefused(offer { $0[2] = "s=-\u{7F}" }, line: 3, .controlCharacter)
        assertRefused(SDPFixtures.sdp(SDPFixtures.offerLines) + "\r", line: 16, .controlCharacter)
    }

    func testLinesMustBeTypeEqualsValueInRFC8866Order() {
        assertRefused(offer { $0.insert("", at: 4) }, line: 5, .malformedLine)
        assertRefused(offer { $0[3] = "T=0 0" }, line: 4, .malformedLine)
        assertRefused(offer { $0[3] = "t =0 0" }, line: 4, .malformedLine)
        assertRefused(offer { $0[2] = "s=" }, line: 3, .malformedLine)
        assertRefused(offer { $0.insert("x=1", at: 4) }, line: 5, .unknownLineType("x"))
        assertRefused(offer { $0.swapAt(0, 1) }, line: 1, .missingLine("v"))
        assertRefused(offer { $0.remove(at: 1) }, line: 2, .missingLine("o"))
        assertRefused(offer { $0.remove(at: 2) }, line: 3, .missingLine("s"))
        assertRefused(offer { $0.insert("i=after the time", at: 4) }, line: 5, .outOfOrder("i"))
        assertRefused(offer { $0.insert("s=again", at: 3) }, line: 4, .outOfOrder("s"))
        assertRefused(offer { $0.insert("r=7d 1h 0 25h", at: 5) }, line: 6, .outOfOrder("r"))
        assertRefused(offer { $0.insert("c=IN IP4 0.0.0.0", at: 8) }, line: 9, .outOfOrder("c"))
        assertRefused(offer { $0.insert("o=- 1 1 IN IP4 0.0.0.0", at: 9) }, line: 10, .outOfOrder("o"))
        assertRefused(offer { $0.remove(at: 3) }, line: 6, .missingLine("t"))
        assertRefused(offer { $0.remove(at: 7) }, line: 7, .missingLine("c"))
        assertRefused(SDPFixtures.sdp(Array(SDPFixtures.offerLines.prefix(6))), line: 0, .noMediaSection)
        assertRefused(SDPFixtures.sdp(["v=0"]), line: 0, .missingLine("o"))
        assertRefused("", line: 0, .missingLine("o"))
        // Multiple time descriptions with repeat times are RFC 8866's and accepted.
        XCTAssertNoThrow(try DataChannelSDP.parse(offer { $0.insert(contentsOf: ["r=7d 1h 0 25h", "t=0 0"], at: 4) }, as: .offer))
    }

    func testSessionLinesMustMatchTheirGrammar() {
        assertRefused(offer { $0[0] = "v=1" }, line: 1, .unsupportedVersion)
        assertRefused(offer { $0[1] = "o=- abc 0 IN IP4 0.0.0.0" }, line: 2, .malformed("o"))
        assertRefused(offer { $0[1] = "o=- 18446744073709551616 0 IN IP4 0.0.0.0" }, line: 2, .malformed("o"))
        assertRefused(offer { $0[1] = "o=-  1 0 IN IP4 0.0.0.0" }, line: 2, .malformed("o"))
        assertRefused(offer { $0[1] = "o=- 1 0 IN IP4" }, line: 2, .malformed("o"))
        assertRefused(offer { $0[3] = "t=0" }, line: 4, .malformed("t"))
        assertRefused(offer { $0[7] = "c=IN IP4 224.2.1.1/127" }, line: 8, .malformed("c"))
        assertRefused(offer { $0[7] = "c=IN IP6 0.0.0.0" }, line: 8, .malformed("c"))
        assertRefused(offer { $0[7] = "c=IN IP4 host.example" }, line: 8, .malformed("c"))
        assertRefused(offer { $0[6] = "m=application 9 UDP/DTLS/SCTP" }, line: 7, .malformed("m"))
        assertRefused(offer { $0[6] = "m=application 9/2 UDP/DTLS/SCTP webrtc-datachannel" }, line: 7, .malformed("m"))
    }

    func testExactlyOneApplicationDataChannelSectionIsAccepted() {
        assertRefused(offer { $0 += ["m=application 9 UDP/DTLS/SCTP webrtc-datachannel"] }, line: 16, .extraMediaSection)
        assertRefused(offer { $0[6] = "m=audio 9 UDP/TLS/RTP/SAVPF 111" }, line: 7, .notDataChannel)
        assertRefused(offer { $0[6] = "m=application 9 DTLS/SCTP 5000" }, line: 7, .notDataChannel)
        assertRefused(offer { $0[6] = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel2" }, line: 7, .notDataChannel)
        assertRefused(offer { $0[6] = "m=application 0 UDP/DTLS/SCTP webrtc-datachannel" }, line: 7, .rejectedMediaSection)
        XCTAssertEqual(try DataChannelSDP.parse(offer { $0[6] = "m=application 9 TCP/DTLS/SCTP webrtc-datachannel" }, as: .offer).mediaProtocol, .tcp)
    }

    func testEveryRequiredAttributeMustBePresent() {
        for (index, name) in [(8, "mid"), (9, "ice-ufrag"), (10, "ice-pwd"), (11, "fingerprint"), (12, "setup"), (13, "sctp-port")] {
            assertRefused(offer { $0.remove(at: index) }, line: 7, .missingAttribute(name))
        }
    }

    func testAttributesMustMatchTheirGrammar() {
        assertRefused(offer { $0[9] = "a=ice-ufrag:abc" }, line: 10, .invalidAttribute("ice-ufrag"))
        assertRefused(offer { $0[9] = "a=ice-ufrag:" + String(repeating: "u", count: 257) }, line: 10, .invalidAttribute("ice-ufrag"))
        assertRefused(offer { $0[10] = "a=ice-pwd:abcdefghijklmnopqrstu" }, line: 11, .invalidAttribute("ice-pwd"))
        assertRefused(offer { $0[10] = "a=ice-pwd:abcdefghijklmnopqrstuv-" }, line: 11, .invalidAttribute("ice-pwd"))
        assertRefused(offer { $0[5] = "a=ice-options:trickle  ice2" }, line: 6, .invalidAttribute("ice-options"))
        assertRefused(offer { $0[11] = "a=fingerprint:sha-256 zz" }, line: 12, .invalidAttribute("fingerprint"))
        assertRefused(offer { $0[11] = "a=fingerprint:sha-1 0G:11" }, line: 12, .invalidAttribute("fingerprint"))
        assertRefused(offer { $0[12] = "a=setup:bogus" }, line: 13, .invalidAttribute("setup"))
        assertRefused(offer { $0[13] = "a=sctp-port:05000" }, line: 14, .invalidAttribute("sctp-port"))
        assertRefused(offer { $0[13] = "a=sctp-port:0" }, line: 14, .invalidAttribute("sctp-port"))
        assertRefused(offer { $0[13] = "a=sctp-port:70000" }, line: 14, .invalidAttribute("sctp-port"))
        assertRefused(offer { $0[14] = "a=max-message-size:64k" }, line: 15, .invalidAttribute("max-message-size"))
        assertRefused(offer { $0[8] = "a=mid:" + String(repeating: "m", count: 33) }, line: 9, .invalidAttribute("mid"))
        assertRefused(offer { $0 += ["a=end-of-candidates:now"] }, line: 16, .invalidAttribute("end-of-candidates"))
        assertRefused(offer { $0.insert("a=ice-lite:yes", at: 4) }, line: 5, .invalidAttribute("ice-lite"))
        assertRefused(offer { $0 += ["a=candidate:1 1 udp -5 192.0.2.1 50000 typ host"] }, line: 16, .invalidCandidate(.invalid(.priority)))
        assertRefused(offer { $0 += ["a=candidate:1 1 udp 1 192.0.2.1 50000 typ host tcptype active"] }, line: 16, .invalidCandidate(.tcpTypeOnUDP))
    }

    func testAttributesMustBeAtTheirLevelAndNotRepeated() {
        assertRefused(offer { $0.insert("a=mid:0", at: 4) }, line: 5, .misplacedAttribute("mid"))
        assertRefused(offer { $0.insert("a=sctp-port:5000", at: 4) }, line: 5, .misplacedAttribute("sctp-port"))
        assertRefused(offer { $0.insert("a=candidate:1 1 udp 1 192.0.2.1 1 typ host", at: 4) }, line: 5, .misplacedAttribute("candidate"))
        assertRefused(offer { $0.append("a=ice-lite") }, line: 16, .misplacedAttribute("ice-lite"))
        assertRefused(offer { $0.append("a=group:BUNDLE 0") }, line: 16, .misplacedAttribute("group"))
        assertRefused(offer { $0.append("a=ice-ufrag:Tthr") }, line: 16, .duplicateAttribute("ice-ufrag"))
        assertRefused(offer { $0.append("a=setup:actpass") }, line: 16, .duplicateAttribute("setup"))
        assertRefused(offer { $0.append("a=sctp-port:5000") }, line: 16, .duplicateAttribute("sctp-port"))
        assertRefused(offer { $0.append("a=mid:1") }, line: 16, .duplicateAttribute("mid"))
        assertRefused(offer { $0.insert("a=group:BUNDLE 0", at: 4) }, line: 6, .duplicateAttribute("group"))
        assertRefused(offer { $0[4] = "a=group:BUNDLE 1" }, line: 5, .bundleMismatch)
        assertRefused(offer { $0[4] = "a=group:BUNDLE 0 1" }, line: 5, .bundleMismatch)
        XCTAssertNoThrow(try DataChannelSDP.parse(offer { $0.insert("a=group:LS 0 1", at: 4) }, as: .offer), "other group semantics")
    }

    func testAFingerprintOtherThanSHA256AloneIsRefused() {
        let sha1 = "a=fingerprint:sha-1 " + Array(repeating: "AB", count: 20).joined(separator: ":")
        let sha512 = "a=fingerprint:sha-512 " + Array(repeating: "AB", count: 64).joined(separator: ":")
        assertRefused(offer { $0[11] = sha1 }, line: 12, .noSHA256Fingerprint)
        assertRefused(offer { $0[11] = sha512; $0.insert(sha1, at: 12) }, line: 12, .noSHA256Fingerprint)
        // Session-level sha-256 does not rescue a section whose own fingerprints are all other hashes.
        assertRefused(offer { $0[11] = sha1; $0.insert("a=fingerprint:" + SDPFixtures.fingerprintValue, at: 4) }, line: 13, .noSHA256Fingerprint)
        XCTAssertEqual(try DataChannelSDP.parse(offer { $0.insert(sha512, at: 11) }, as: .offer).fingerprints, [SDPFixtures.fingerprint])
    }

    func testSetupMustFitTheDescriptionType() throws {
        assertRefused(offer { $0[12] = "a=setup:active" }, line: 13, .setupNotAllowed("active"))
        assertRefused(offer { $0[12] = "a=setup:passive" }, line: 13, .setupNotAllowed("passive"))
        assertRefused(offer { $0[12] = "a=setup:holdconn" }, line: 13, .setupNotAllowed("holdconn"))
        assertRefused(SDPFixtures.sdp(SDPFixtures.offerLines), as: .answer, line: 13, .setupNotAllowed("actpass"))
        assertRefused(offer { $0[12] = "a=setup:holdconn" }, as: .answer, line: 13, .setupNotAllowed("holdconn"))
        XCTAssertEqual(try DataChannelSDP.parse(offer { $0[12] = "a=setup:passive" }, as: .answer).setup, .passive)
        XCTAssertEqual(try DataChannelSDP.parse(offer { $0[12] = "a=setup:ACTIVE" }, as: .answer).setup, .active, "ABNF literals are case-insensitive")
    }

    func testAnAnswerMustAnswerTheOffersSection() {
        let answer = offer { $0[4] = "a=group:BUNDLE data"; $0[8] = "a=mid:data"; $0[12] = "a=setup:active" }
        XCTAssertThrowsError(try DataChannelSDP.parseAnswer(answer, to: SDPFixtures.offer)) {
            XCTAssertEqual($0 as? DataChannelSDP.ParseError, DataChannelSDP.ParseError(line: 0, .midMismatch))
        }
    }

    func testErrorsDescribeTheLineAndTheProblem() {
        XCTAssertEqual(DataChannelSDP.ParseError(line: 13, .setupNotAllowed("actpass")).description, "SDP line 13: a=setup:actpass is not allowed here")
        XCTAssertEqual(DataChannelSDP.ParseError(line: 0, .tooLarge).description, "SDP: the description is over 32768 bytes")
    }
}
