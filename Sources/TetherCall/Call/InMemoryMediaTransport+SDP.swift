extension InMemoryMediaTransport {
    static let tokenAttribute = "a=tether-inmemory:"

    /// A minimal session description of one data m-line that names the transport by token.
    static func description(token: String) -> String {
        ["v=0", "o=- \(token) 0 IN IP4 127.0.0.1", "s=-", "t=0 0", "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
         "c=IN IP4 0.0.0.0", "a=mid:0", "a=sctp-port:5000", tokenAttribute + token].map { $0 + "\r\n" }.joined()
    }

    /// The token of a description made by `description(token:)`; nil for any other SDP.
    static func token(in sdp: String) -> String? {
        let lines = sdp.split(separator: "\r\n")
        guard lines.first == "v=0" else { return nil }
        let tokens = lines.filter { $0.hasPrefix(tokenAttribute) }.map { String($0.dropFirst(tokenAttribute.count)) }
        guard tokens.count == 1, let token = tokens.first, !token.isEmpty else { return nil }
        return token
    }

    /// The one host candidate a transport gathers: its token in the `ufrag` field, as ICE puts
    /// the username fragment there.
    static func hostCandidate(token: String) -> CallCandidate {
        CallCandidate(candidate: "candidate:1 1 udp 2122252543 127.0.0.1 9 typ host generation 0 ufrag \(token)", sdpMid: "0", sdpMLineIndex: 0)
    }

    static let endOfCandidates = CallCandidate.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0)
}
