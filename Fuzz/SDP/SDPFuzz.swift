// The data-only session descriptions and ICE candidates a peer sends in `offer`, `answer` and
// `candidate` signals (RFC 8866, RFC 8841, RFC 8839; signaling.md §7).
//
// Input: a mode byte, then the text.
//   0 an offer    1 an answer    2 the answer to Tether's own offer    3 a trickled candidate
//   4 a fingerprint attribute value
// What reads must write back (`text`, `attributeValue`) as something that reads the same, and an
// offer read must be answerable.
import TetherCall
import TetherRTC

enum SDPFuzz {
    static let fingerprint = CertificateFingerprint(digest: Array(0..<32))
    static let ice = try! ICECredentials(ufrag: "Tthr", pwd: "abcdefghijklmnopqrstuv+/")
    static let offer = DataChannelSDP.offer(origin: .init(sessionID: 4_962_303_333_179_871_722), ice: ice, fingerprint: fingerprint)

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let mode = input.byte() % 5
        let text = String(decoding: input.rest(), as: UTF8.self)
        switch mode {
        case 0, 1:
            let type: DataChannelSDP.DescriptionType = mode == 0 ? .offer : .answer
            guard let sdp = try? DataChannelSDP.parse(text, as: type) else { return }
            reread(sdp)
            if type == .offer {
                let answer = DataChannelSDP.answer(to: sdp, origin: .init(sessionID: 1), ice: ice, fingerprint: fingerprint)
                expect((try? DataChannelSDP.parseAnswer(answer.text, to: sdp)) == answer, "Tether's answer to an offer does not read back")
            }
        case 2:
            guard let answer = try? DataChannelSDP.parseAnswer(text, to: offer) else { return }
            expect(answer.mid == offer.mid, "an answer to another section")
            reread(answer)
        case 3:
            guard let candidate = try? ICECandidate.parse(text) else { return }
            expect((try? ICECandidate.parse(candidate.attributeValue)) == candidate, "a candidate did not survive its encoding")
            let signal = offer.callCandidate(candidate)
            // Signalled as this device's own: a relayed one without its related address.
            expect(offer.isForDataSection(signal) && (try? ICECandidate(signal)) == candidate.signalled, "a candidate did not survive its signal")
            expect(candidate.type != .relay || candidate.signalled.relatedPort ?? 0 == 0, "a relayed candidate signalled its related address")
        default:
            guard let parsed = try? CertificateFingerprint.parse(text) else { return }
            expect((try? CertificateFingerprint.parse(parsed.value)) == parsed && parsed.digest.count == 32, "a fingerprint did not survive its encoding")
        }
    }

    static func reread(_ sdp: DataChannelSDP) {
        expect(!sdp.fingerprints.isEmpty, "a description without a fingerprint")
        expect((try? DataChannelSDP.parse(sdp.text, as: sdp.type)) == sdp, "a description did not survive its encoding")
        for candidate in sdp.candidates { touch(sdp.callCandidate(candidate)) }
    }
}

extension SDPFuzz {
    /// RFC 8841 descriptions as libwebrtc, Firefox and aiortc write them (SDPFixtures,
    /// DataChannelSDPParserTests), Tether's own, and RFC 8839 candidates of every type.
    static var seeds: [String: [UInt8]] {
        let fingerprintValue = fingerprint.value
        let chrome = [
            "v=0", "o=- 4611731400430051336 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0", "a=extmap-allow-mixed",
            "a=msid-semantic: WMS", "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0",
            "a=candidate:1467250027 1 udp 2122260223 192.168.0.196 46243 typ host generation 0 network-id 1",
            "a=candidate:1467250027 1 tcp 1518280447 192.168.0.196 9 typ host tcptype active generation 0",
            "a=candidate:435653019 1 udp 1686052607 203.0.113.5 46243 typ srflx raddr 192.168.0.196 rport 46243",
            "a=candidate:2 1 udp 2122194687 8d2e4e5b-6c9a-4a8e-a2c5-0a6d1b3e9f10.local 53421 typ host",
            "a=ice-ufrag:EsAw", "a=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1", "a=ice-options:trickle",
            "a=fingerprint:sha-256 \(fingerprintValue.dropFirst(8))", "a=fingerprint:sha-1 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33",
            "a=setup:actpass", "a=mid:0", "a=sctp-port:5000", "a=max-message-size:262144",
        ]
        let firefoxAnswer = [
            "v=0", "o=mozilla...THIS_IS_SDPARTA-99.0 7315568411563412297 0 IN IP4 0.0.0.0", "s=-", "t=0 0",
            "a=fingerprint:\(fingerprintValue)", "a=group:BUNDLE 0", "a=ice-options:trickle", "a=msid-semantic:WMS *",
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=sendrecv", "a=ice-pwd:2c3c6e6f5b5a4d3e2f1a0b9c8d7e6f50",
            "a=ice-ufrag:1f2e3d4c", "a=mid:0", "a=setup:active", "a=sctp-port:5000", "a=max-message-size:1073741823",
            "a=candidate:0 1 UDP 2122252543 2001:db8::1 49203 typ host", "a=end-of-candidates",
        ]
        func sdp(_ lines: [String]) -> String { lines.map { $0 + "\r\n" }.joined() }
        let texts: [String: (UInt8, String)] = [
            "offer-chrome": (0, sdp(chrome)),
            "offer-lf-only": (0, chrome.joined(separator: "\n")),
            "offer-tether": (0, offer.text),
            "answer-firefox": (1, sdp(firefoxAnswer)),
            "answer-to-offer": (2, sdp(firefoxAnswer)),
            "answer-tether": (2, DataChannelSDP.answer(to: offer, origin: .init(sessionID: 7), ice: ice, fingerprint: fingerprint).text),
            "candidate-host": (3, "candidate:1 1 udp 2122260223 192.0.2.1 54321 typ host"),
            "candidate-relay": (3, "candidate:3 1 UDP 41885439 198.51.100.7 3478 typ relay raddr 203.0.113.5 rport 50000 generation 0 ufrag EsAw"),
            "candidate-tcp": (3, "candidate:4 1 TCP 1518280447 2001:db8::5 9 typ host tcptype passive"),
            "candidate-prflx": (3, "candidate:5 1 udp 1845501695 203.0.113.9 61000 typ prflx raddr 0.0.0.0 rport 0"),
            "fingerprint": (4, fingerprintValue),
        ]
        return texts.mapValues { [$0.0] + Array($0.1.utf8) }
    }
}
