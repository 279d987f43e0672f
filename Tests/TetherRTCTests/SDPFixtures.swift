import TetherRTC

/// Fixed inputs for the SDP tests, so built descriptions can be compared with exact text.
enum SDPFixtures {
    static let fingerprint = CertificateFingerprint(digest: Array(0..<32))
    static let fingerprintValue = "sha-256 " + (0..<32).map { byte in
        let hex = String(byte, radix: 16, uppercase: true)
        return hex.count == 1 ? "0" + hex : hex
    }.joined(separator: ":")
    static let ice = try! ICECredentials(ufrag: "Tthr", pwd: "abcdefghijklmnopqrstuv+/")
    static let answerICE = try! ICECredentials(ufrag: "aN5w", pwd: "ZYXWVUTSRQPONMLKJIHGFEDCBA")
    static let origin = DataChannelSDP.Origin(sessionID: 4_962_303_333_179_871_722)
    static let answerOrigin = DataChannelSDP.Origin(sessionID: 1_234_567_890, sessionVersion: 3)

    static var offer: DataChannelSDP { .offer(origin: origin, ice: ice, fingerprint: fingerprint) }

    /// `lines` joined with CRLF after each.
    static func sdp(_ lines: [String]) -> String { lines.map { $0 + "\r\n" }.joined() }

    /// Tether's offer (no candidates) line by line.
    static let offerLines = [
        "v=0",
        "o=- 4962303333179871722 0 IN IP4 0.0.0.0",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0",
        "a=ice-options:trickle",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        "a=mid:0",
        "a=ice-ufrag:Tthr",
        "a=ice-pwd:abcdefghijklmnopqrstuv+/",
        "a=fingerprint:" + fingerprintValue,
        "a=setup:actpass",
        "a=sctp-port:5000",
        "a=max-message-size:65536",
    ]
}
