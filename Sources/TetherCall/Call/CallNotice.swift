public import TetherWire

/// What the user interface learns about calls. No notice carries key material.
public enum CallNotice: Equatable, Sendable {
    /// `dial` was refused; no call exists.
    case dialRefused(call: CallUUID, CallDialRefusal)
    /// A validated `offer` (§7.2): show an invitation naming the caller's ID; it needs explicit
    /// consent (`accept`) or `decline` (§7.3 step 2).
    case incoming(from: SignalingID, call: CallUUID)
    /// The callee accepted (its `answer` arrived); media is connecting.
    case answered(call: CallUUID)
    /// Key confirmation completed (§9.3): the conversation is authenticated and chat may begin;
    /// show the safety number (§11).
    case secured(call: CallUUID, safetyNumber: String)
    /// A text from the peer (its receipt is already on the way), or the peer's receipt for one
    /// of this side's texts.
    case message(call: CallUUID, CallPayload)
    /// A `sendText` was refused; nothing was sent and the call goes on.
    case sendRefused(call: CallUUID, id: MessageID, CallSendError)
    /// Key rotation completed; both directions use this epoch's keys (§10).
    case rotated(call: CallUUID, epoch: Int)
    /// The call is over, for this reason; its media is closed and nothing more comes for it.
    case ended(call: CallUUID, CallEndReason)
}
