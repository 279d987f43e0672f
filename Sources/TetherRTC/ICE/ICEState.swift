/// The component's ICE state as the owner sees it (libnice's `NiceComponentState`). `failed` is
/// final: once reported, no other state follows and the owner ends the call.
public enum ICEState: Sendable, Equatable {
    /// No checks running (before gathering, or libnice restarting the component).
    case disconnected
    case gathering
    case connecting
    /// At least one pair works; data can flow.
    case connected
    /// Nomination concluded: the selected pair is final.
    case ready
    case failed(ICEFailure)
}

/// Why an agent failed.
public enum ICEFailure: Sendable, Equatable, CustomStringConvertible {
    /// Every candidate pair failed its checks (or, after connecting, consent was lost: RFC 7675).
    case connectivityChecksFailed
    /// Relay-only, and gathering ended without one relayed candidate: every TURN server was
    /// unreachable, unresolvable or refused the credentials.
    case noRelayCandidate
    /// libnice refused to set the agent up (`what` names the step).
    case setupFailed(String)
    /// libnice refused a remote candidate that Tether had parsed.
    case remoteCandidateRefused

    public var description: String {
        switch self {
        case .connectivityChecksFailed: "ICE connectivity checks failed"
        case .noRelayCandidate: "no relayed candidate was gathered (TURN unreachable or credentials refused)"
        case let .setupFailed(what): "libnice refused \(what)"
        case .remoteCandidateRefused: "libnice refused a remote candidate"
        }
    }
}
