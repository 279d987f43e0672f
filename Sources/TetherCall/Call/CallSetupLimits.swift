/// The call's fixed numbers (signaling.md §7.5, §14). Times are monotonic nanoseconds.
public enum CallSetupLimits {
    /// The caller's wait for `answer` or `reject`, from the dial.
    public static let ringingTimeout: Duration = .seconds(45)
    /// How long the callee shows an invitation it has not answered, from the `offer`'s arrival.
    /// The caller's own 45 s began earlier (before it sent the offer), so this runs out after
    /// the caller's and only matters when its `close` was lost.
    public static let invitationTimeout: Duration = .seconds(45)
    /// ICE and the data channel: from the `answer`'s arrival on the caller, from the user's
    /// consent (which makes the answer) on the callee.
    public static let connectingTimeout: Duration = .seconds(30)
    /// How long a call whose data channel closed waits for the peer's `close` before it ends
    /// as `mediaClosed`: a peer that hangs up closes its data channel as it sends `close`, and
    /// the channel's close often arrives first, so "the peer hung up" would otherwise be lost.
    public static let closeSignalGrace: Duration = .seconds(2)
    /// Remote candidates held before the remote description is set; the next one ends the call.
    public static let queuedCandidates = 64
    /// Local candidates held until the offer or answer they belong to has been sent; the same
    /// bound, for the same reason: nothing grows without limit.
    public static let heldLocalCandidates = 64
    /// Data-channel messages held before this side's channel handler is ready (§7.3 step 5).
    public static let heldFrames = 16
    /// A call is neither started nor accepted when the TURN credentials expire sooner (§7.5).
    public static let credentialMarginSeconds: Int64 = 30
    /// Texts the machine holds for a call until its secure channel takes them (before `secured`,
    /// during a rotation, behind the pacing): the user's input waits here, outside the channel,
    /// so no burst can overflow a limit of §9.6 or §10. Past it `sendText` is refused with
    /// `queueFull`; `CallAgent.queue(_:on:)` waits for room instead, so an application reading
    /// input through it reads no faster than the channel sends. Small on purpose: with the
    /// channel's own window (one pacing window, 40 frames) everything accepted leaves within
    /// about 3.3 s at the paced 32 frames a second, inside `hangUpGrace`.
    public static let outgoingTexts = 64
    /// A graceful hang-up's wait for what is queued to leave and for its receipts, before the
    /// `close` goes anyway; what is still undelivered then is reported text by text.
    public static let hangUpGrace: Duration = .seconds(5)
    /// Ended calls whose ids are remembered, so their late signals and replayed offers are
    /// dropped (§7.2: stale callbacks).
    public static let endedCallMemory = 32
}
