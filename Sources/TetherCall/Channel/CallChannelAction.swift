/// What a `CallSecureChannel` asks its transport and its user interface to do, in order.
public enum CallChannelAction: Equatable, Sendable {
    /// Send this frame as one data-channel message (§7.4, §9.2).
    case send([UInt8])
    /// The peer's key confirmation arrived (§9.3): the conversation is authenticated and may be
    /// shown with this safety number (§11).
    case authenticated(safetyNumber: String)
    /// A new text from the peer (a receipt for it is already on its way), or the peer's receipt
    /// for a text this side sent.
    case deliver(CallPayload)
    /// A rotation completed: both directions now use the keys of this epoch (§10).
    case rotated(epoch: Int)
    /// The channel failed and is closed: stop reading, close the data channel and the peer
    /// connection, and send `close` (§9.6). The cipher states are already released.
    case terminate(CallChannelFailure)
}

/// Why the user's own request was refused; the channel itself is unaffected.
public enum CallSendError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Before the peer's key confirmation (§9.3): nothing but the handshake may be sent.
    case notAuthenticated
    /// The channel terminated.
    case closed
    /// The payload breaks a limit the peer would terminate on (§9.5).
    case invalidPayload(CallPayloadProblem)

    public var description: String {
        switch self {
        case .notAuthenticated: "the conversation is not authenticated yet"
        case .closed: "the secure channel is closed"
        case let .invalidPayload(problem): "cannot send: \(problem)"
        }
    }
}
