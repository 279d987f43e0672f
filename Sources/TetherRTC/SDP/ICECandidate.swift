public import TetherCall

/// One ICE candidate as the `candidate` attribute describes it (RFC 8839 §5.1, with RFC 6544's
/// `tcptype` for TCP candidates). The connection address is always an IPv4 or IPv6 literal:
/// Tether cannot resolve hostnames, mDNS `.local` names included, so it never holds one (parsing
/// reports those as unusable rather than malformed; see `ParseError.isUnusable`).
public struct ICECandidate: Sendable, Hashable, CustomStringConvertible {
    /// The transport the candidate is reached over. RFC 8839 names only UDP; TCP is RFC 6544's.
    public enum Transport: String, Sendable, Hashable {
        case udp, tcp
    }

    /// `cand-type`: how the agent learnt the address (RFC 8445 §5.1.1).
    public enum CandidateType: String, Sendable, Hashable {
        case host, srflx, prflx, relay
    }

    /// RFC 6544 §4.5: who opens the TCP connection, or simultaneous open.
    public enum TCPType: String, Sendable, Hashable {
        case active, passive, so
    }

    /// An extension name-value pair the grammar lets through (`generation`, `ufrag`,
    /// `network-id`, …), kept in order so a candidate is passed on as it was received.
    public struct Extension: Sendable, Hashable {
        public let name: String
        public let value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public var foundation: String
    /// 1 for the data channel's only component (RTP's RTCP would be 2).
    public var componentID: Int
    public var transport: Transport
    public var priority: UInt32
    public var connectionAddress: String
    public var port: UInt16
    public var type: CandidateType
    public var relatedAddress: String?
    public var relatedPort: UInt16?
    /// Present exactly when `transport` is TCP.
    public var tcpType: TCPType?
    public var extensions: [Extension]

    /// A candidate from its parts; `parse` is the way in for received ones, this is for the ones
    /// the local agent gathered. The parts are taken as given; `attributeValue` writes them.
    public init(foundation: String, componentID: Int = 1, transport: Transport, priority: UInt32, connectionAddress: String, port: UInt16,
                type: CandidateType, relatedAddress: String? = nil, relatedPort: UInt16? = nil, tcpType: TCPType? = nil,
                extensions: [Extension] = []) {
        self.foundation = foundation
        self.componentID = componentID
        self.transport = transport
        self.priority = priority
        self.connectionAddress = connectionAddress
        self.port = port
        self.type = type
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.tcpType = tcpType
        self.extensions = extensions
    }

    /// `candidate:…`, the attribute without its `a=`: the form of a `CallCandidate` and, after
    /// `a=`, of an SDP line. Keywords and the transport are written in lowercase as libwebrtc
    /// does; RFC 8839's grammar matches them in any case.
    public var attributeValue: String {
        var parts = ["candidate:" + foundation, String(componentID), transport.rawValue, String(priority), connectionAddress, String(port),
                     "typ", type.rawValue]
        if let relatedAddress { parts += ["raddr", relatedAddress] }
        if let relatedPort { parts += ["rport", String(relatedPort)] }
        if let tcpType { parts += ["tcptype", tcpType.rawValue] }
        for pair in extensions { parts += [pair.name, pair.value] }
        return parts.joined(separator: " ")
    }

    public var description: String { attributeValue }

    /// The candidate as Tether signals one of its own. A relayed candidate's related address is
    /// the mapped address of its TURN allocation: the TURN server's view of this device, which
    /// behind a NAT is its public address and port. Relaying is how a device keeps that address
    /// from the peer (relay-only calls), so it is never written: `raddr 0.0.0.0 rport 0` (`::`
    /// for an IPv6 candidate), as libwebrtc writes a related address it withholds. Nothing is
    /// lost: ICE never reads a remote candidate's related address (it is for diagnostics).
    /// Other types keep theirs; a reflexive candidate's is its base, a host candidate offered
    /// beside it, and relay-only offers neither.
    public var signalled: ICECandidate {
        guard type == .relay else { return self }
        var copy = self
        copy.relatedAddress = isIPv6 ? "::" : "0.0.0.0"
        copy.relatedPort = 0
        return copy
    }

    /// Whether the address is IPv6 (the `c=` line's address type follows it).
    public var isIPv6: Bool { connectionAddress.contains(":") }

    /// This device's candidate as a `candidate` signal body carries it (signaling.md §7.1), in
    /// its `signalled` form.
    public func callCandidate(sdpMid: String?, sdpMLineIndex: Int?) -> CallCandidate {
        CallCandidate(candidate: signalled.attributeValue, sdpMid: sdpMid, sdpMLineIndex: sdpMLineIndex)
    }

    /// The candidate a `candidate` signal carries; the end-of-candidates marker (an empty
    /// string) is not one and throws `.notACandidate`.
    public init(_ callCandidate: CallCandidate) throws(ParseError) {
        self = try Self.parse(callCandidate.candidate)
    }
}
