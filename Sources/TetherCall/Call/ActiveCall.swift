import TetherSync
import TetherCrypto
import TetherWire

/// A text the user typed, waiting for the secure channel to take it.
struct PendingText: Sendable {
    let id: MessageID
    let text: String
    let sentAt: Int64
}

/// Everything the machine knows about its current call.
struct ActiveCall: Sendable {
    let id: CallUUID
    let peer: SignalingID
    let role: CallSecureChannel.Role
    var phase: CallSummary.Phase
    /// The peer's verified agreement key (from its offer or answer).
    var peerAgreementKey: X25519.PublicKey?
    /// The callee keeps the offer's SDP until the user consents.
    var remoteOffer: String?
    /// The media transport exists (`createOffer` or `acceptOffer` went out): it must be closed.
    var hasMedia = false
    /// This side's offer or answer left: the peer knows the call, and local candidates may follow.
    var descriptionSent = false
    var remoteDescriptionSet = false
    /// Peer candidates waiting for the remote description (§7.3 step 3).
    var queuedRemoteCandidates: [CallCandidate] = []
    /// Local candidates waiting for this side's offer or answer to leave.
    var heldLocalCandidates: [CallCandidate] = []
    /// The callee's `channel` reached the caller (§7.3 step 5); for the callee, the caller's.
    var peerChannelReceived = false
    /// This side's `channel` left: the callee then accepts frames (§7.3 step 5).
    var channelSent = false
    /// Created when the data channel opens; its 15 s confirmation timeout runs from there.
    var channel: CallSecureChannel?
    /// Data-channel messages that came before this side's handler was ready.
    var heldFrames: [[UInt8]] = []
    /// The deadline that applies now and how the call ends at it: a setup timeout (ringing,
    /// invitation or connecting; once the data channel is open the secure channel's own timeout
    /// takes over), or the grace after the data channel closed.
    var deadline: (at: MonotonicInstant, reason: CallEndReason)?
    /// The data channel closed under the call: the secure channel is gone, the peer's `close`
    /// may still tell why.
    var mediaClosed = false
    /// The user's texts not yet taken by the secure channel, in order
    /// (`CallSetupLimits.outgoingTexts`).
    var outgoing: [PendingText] = []
    /// Texts that had left when the data channel closed and whose receipts can no longer come.
    var unconfirmed: [MessageID] = []
    /// The peer ended the call (its `close` arrived) while receipts it sent may still be on the
    /// data channel: the call ends for this reason once they are in, or the channel closes.
    var peerEnded: CallEndReason?
    /// A graceful hang-up is under way: nothing new is taken, and the call ends once everything
    /// accepted is delivered (or at its deadline).
    var hangingUp = false

    var isCaller: Bool { role == .initiator }

    /// Something accepted from the user, or owed to the peer, has not been delivered yet.
    var hasUndelivered: Bool { !outgoing.isEmpty || channel?.hasUndelivered == true }

    var summary: CallSummary {
        CallSummary(call: id, peer: peer, direction: isCaller ? .outgoing : .incoming, phase: phase)
    }

    /// The handler is ready for frames: the caller once its channel exists, the callee once it
    /// also sent `channel`.
    var acceptsFrames: Bool { channel != nil && (isCaller || channelSent) }

    /// The call no longer needs signaling: every signal it waits for arrived or left (the caller
    /// has the callee's `channel`, the callee sent its own), so the data channel carries the rest.
    var isPastSignaling: Bool { isCaller ? peerChannelReceived : channelSent }
}
