public import TetherWire

/// Everything a `CallMachine` reacts to: the user's requests, the signaling connection, each
/// call's media transport, and time. User requests name the call they are about, so a tap meant
/// for an invitation that has meanwhile ended cannot accept the next one, and a text cannot go to
/// another peer than the one on screen.
public enum CallEvent: Sendable {
    // MARK: User
    /// Call `peer`. The call id is passed in (`CallUUID.random()` in an app) so runs are
    /// reproducible; a refusal comes back as `CallNotice.dialRefused`.
    case dial(peer: SignalingID, call: CallUUID)
    /// Consent to the invitation of `call` (§7.3 step 2).
    case accept(call: CallUUID)
    /// Refuse the invitation of `call`: `reject` `declined`.
    case decline(call: CallUUID)
    /// End `call` as a person means it: every text already accepted leaves first and its receipt
    /// is waited for (at most `CallSetupLimits.hangUpGrace`), then `close` `hangup`. What could
    /// not be delivered by then is reported text by text (`CallNotice.undelivered`). An
    /// invitation is declined instead; a call not yet secured ends at once.
    case hangUp(call: CallUUID)
    /// End `call` now: `close` `hangup` at once, whatever is still in flight (reported as
    /// `undelivered`).
    case hangUpNow(call: CallUUID)
    /// Send a text on `call` (§9.5). `sentAt` is UNIX milliseconds. It waits in the call's
    /// queue until the secure channel takes it: before `secured`, during a rotation, behind the
    /// pacing. Refused (`sendRefused`) only when it breaks a payload limit, the queue is full,
    /// or the call is ending or gone.
    case sendText(call: CallUUID, text: String, id: MessageID, sentAt: Int64)
    /// Fresh keys for `call` now (§10).
    case rotate(call: CallUUID)

    // MARK: Signaling
    /// The signaling connection registered (again): calls may be made until `iceExpiresAt`
    /// (UNIX seconds, §5.3) less the 30 s margin.
    case registered(iceExpiresAt: Int64)
    /// A forwarded `signal`, exactly as received; the machine makes every check of §7.2.
    case signal(SignalMessage)
    /// The signaling connection is gone (closed, failed, or not yet registered again).
    case signalingLost
    /// The server refused a signal this side sent, with the §5.6 code (`offline`: the peer is
    /// not routable, and the signal was dropped, never queued).
    case signalRefused(call: CallUUID, kind: SignalKind, code: String)

    // MARK: Media and time
    /// What the media transport of `call` reported.
    case media(call: CallUUID, CallMediaEvent)
    /// Time passed; due at `CallMachine.nextDeadline`.
    case tick
}
