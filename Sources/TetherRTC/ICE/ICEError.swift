/// Why an ICE agent refused a call from its owner. Each ends the call (signaling.md §7: `close`
/// `error`); none stops the process.
public enum ICEError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An `iceServers` URL is not `stun:`/`turn:`/`turns:` host[:port][?transport=…].
    case malformedServerURL
    /// A TURN URL's entry has no username or credential.
    case missingTURNCredentials
    /// Relay-only was asked for, but no TURN URL libnice can use was given.
    case noRelayServer
    /// More than `ICEServerPlan.maxRelays` TURN URLs.
    case tooManyServers
    /// A `localAddresses` entry is not an IP literal.
    case invalidLocalAddress
    /// A remote candidate that is not a candidate attribute value (RFC 8839 §5.1).
    case malformedCandidate(ICECandidate.ParseError)
    /// A remote candidate for another component than 1 (everything is rtcp-muxed and bundled).
    case unexpectedComponent(Int)
    /// Larger than `ICEAgent.maxDatagramSize`.
    case datagramTooLarge(Int)
    /// `close()` was called.
    case closed

    public var description: String {
        switch self {
        case .malformedServerURL: "an ICE server URL is malformed"
        case .missingTURNCredentials: "a TURN server has no username or credential"
        case .noRelayServer: "relay-only ICE needs a usable TURN server"
        case .tooManyServers: "more than \(ICEServerPlan.maxRelays) TURN servers"
        case .invalidLocalAddress: "a local address for ICE is not an IP address"
        case let .malformedCandidate(error): "remote candidate refused: \(error)"
        case let .unexpectedComponent(component): "remote candidate for component \(component) (only 1 is used)"
        case let .datagramTooLarge(size): "datagram of \(size) bytes is larger than \(ICEAgent.maxDatagramSize)"
        case .closed: "the ICE agent is closed"
        }
    }
}
