public import TetherWire

/// The machine's one call, as the user interface shows it.
public struct CallSummary: Equatable, Sendable {
    /// Who dialed.
    public enum Direction: Sendable, Hashable {
        /// This side dialed: the caller and Noise initiator.
        case outgoing
        /// The peer dialed.
        case incoming
    }

    /// Where the call is, from ringing to chat.
    public enum Phase: Sendable, Hashable {
        /// The caller waits for `answer` or `reject` (the offer may still be in the making).
        case ringing
        /// The callee shows the invitation and waits for the user.
        case invited
        /// Accepted: ICE and the data channel are coming up.
        case connecting
        /// The data channel is open; the handshake and key confirmation run.
        case securing
        /// Key confirmation done: chat.
        case secured
    }

    /// The call's id, as every notice names it.
    public let call: CallUUID
    /// The other side's ID.
    public let peer: SignalingID
    /// Who dialed.
    public let direction: Direction
    /// Where the call is now.
    public let phase: Phase

    /// A summary as the machine reports it.
    public init(call: CallUUID, peer: SignalingID, direction: Direction, phase: Phase) {
        self.call = call
        self.peer = peer
        self.direction = direction
        self.phase = phase
    }
}
