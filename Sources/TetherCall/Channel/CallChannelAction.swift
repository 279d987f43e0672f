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
