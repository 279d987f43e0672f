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
    /// A text this side accepted will not be confirmed: it never left (`notSent`), or it left and
    /// its receipt never came (`unconfirmed`). Said for each such text just before `ended`, so
    /// no text is lost without a word.
    case undelivered(call: CallUUID, id: MessageID, CallTextLoss)
    /// The call is over, for this reason; its media is closed and nothing more comes for it.
    case ended(call: CallUUID, CallEndReason)
}

/// How a text was lost when its call ended.
public enum CallTextLoss: Sendable, Hashable, CustomStringConvertible {
    /// It was still queued on this side: the peer never saw it.
    case notSent
    /// It was handed to the channel, but no receipt came: the peer may or may not have it.
    case unconfirmed

    /// The loss in words, for the user.
    public var description: String {
        switch self {
        case .notSent: "not sent"
        case .unconfirmed: "sent, no receipt"
        }
    }
}
