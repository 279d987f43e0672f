public import TetherWire

/// How one call's ICE agent is set up (one stream, one component: the data channel is bundled
/// and rtcp-muxed, so there is nothing else to carry).
public struct ICEConfiguration: Sendable {
    /// RFC 8445 §6.1.1 / JSEP §5.2.1: the offerer is controlling, the answerer controlled.
    public enum Role: Sendable {
        case controlling, controlled
    }

    public var role: ICEConfiguration.Role
    /// The `iceServers` of `registered` (signaling.md §8.4).
    public var servers: [ICEServer]
    /// signaling.md §7.5 (`iceTransportPolicy` `relay`): only relayed local candidates are
    /// gathered and offered, so only relay pairs can be used and the peer never learns a host or
    /// server-reflexive address.
    public var relayOnly: Bool
    /// ICE-TCP candidates (RFC 6544). Off: every WebRTC peer speaks ICE over UDP, and a TURN
    /// server reached over TCP or TLS already covers networks that block UDP.
    public var tcpCandidates: Bool
    /// The interface addresses host candidates are gathered on (IP literals); empty means the
    /// addresses of every interface libnice finds.
    public var localAddresses: [String]
    /// The local UDP ports candidates may bind (a firewall's pinhole); nil for any.
    public var portRange: ClosedRange<UInt16>?

    public init(role: ICEConfiguration.Role, servers: [ICEServer] = [], relayOnly: Bool = false, tcpCandidates: Bool = false,
                localAddresses: [String] = [], portRange: ClosedRange<UInt16>? = nil) {
        self.role = role
        self.servers = servers
        self.relayOnly = relayOnly
        self.tcpCandidates = tcpCandidates
        self.localAddresses = localAddresses
        self.portRange = portRange
    }
}
