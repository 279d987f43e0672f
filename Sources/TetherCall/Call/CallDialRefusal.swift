/// Why a `dial` made no call.
public enum CallDialRefusal: Equatable, Sendable, CustomStringConvertible {
    /// Another call is in progress: at most one at a time (§7.2).
    case callInProgress
    /// Not registered with the signaling server, so no offer can leave.
    case signalingUnavailable
    /// The TURN credentials expire in less than 30 s (§7.5): reconnect to get new ones.
    case credentialsExpiring
    /// The ID is this identity's own.
    case ownID
    /// The ID's 32 bytes are not an Ed25519 public key (§3.1): nobody can answer as it.
    case invalidPeerID
    /// The call id belongs to a call this machine already had: every call needs a fresh one.
    case callIDReused

    /// A sentence for the user.
    public var description: String {
        switch self {
        case .callInProgress: "another call is in progress"
        case .signalingUnavailable: "not connected to the signaling server"
        case .credentialsExpiring: "the relay credentials are about to expire; reconnect first"
        case .ownID: "that is this identity's own ID"
        case .invalidPeerID: "that ID is not a valid key"
        case .callIDReused: "the call id was already used"
        }
    }
}
