/// The secure channel's fixed numbers (signaling.md §9.5, §9.6, §10, §7.5, §13.1). Times are
/// monotonic nanoseconds, as every event of `CallSecureChannel` carries them.
public enum CallChannelLimits {
    /// A session's lifetime, from the channel's creation (§9.6).
    public static let sessionDuration: Duration = .seconds(3_600)
    /// Frames per direction, every kind and every epoch counted (§9.6).
    public static let framesPerDirection = 100_000
    /// Frames per rate window: the receiver's fixed window closes on the 41st, the sender paces
    /// to stay under it in any window (§9.6, §13.1).
    public static let framesPerWindow = 40
    /// The receiver's fixed window for `framesPerWindow` (§9.6).
    public static let rateWindow: Duration = .seconds(1)
    /// The sender's window for those 40 frames: longer than the receiver's, because the
    /// receiver counts arrival times. Frames that left a full window apart arrive closer
    /// together when the earlier one was delayed more (a TURN hop, a retransmission), and 40
    /// per 1,000 ms of sending then became 41 in one of the peer's windows and closed the call
    /// (seen in 1 of 5 benchmark bursts on loopback). With 1.25 s, a 1 s receiving window sees
    /// at most 40 while delivery jitter stays under 250 ms; the sender still never exceeds 40 in
    /// any 1,000 ms (§13.1), and sustained it carries 32 frames a second, so the session's
    /// 100,000 frames remain reachable within its hour. (No sender-side window survives every
    /// case: an ordered channel that loses a packet delivers what queued behind it at once.)
    public static let pacingWindow: Duration = .milliseconds(1_250)
    /// 1 type byte + 32,768 bytes of plaintext + the 16-byte tag (§9.6).
    public static let maxFrameBytes = 32_785
    /// The largest encoded application payload (§9.5).
    public static let maxPayloadBytes = 32_768
    /// Unicode scalar values of a text (§9.5).
    public static let textScalars = 1...4_000
    /// Received text ids remembered for deduplication (§9.5).
    public static let dedupWindow = 512
    /// Sent text ids a receipt may still match: as many as the peer deduplicates (§9.5). The
    /// send window stops at it, so no text in flight is forgotten before its receipt comes.
    public static let receiptWindow = 512
    /// Rotation triggers (§10): transport frames sent under one epoch, and an epoch's age.
    public static let rotationFrameTrigger = 500
    /// Trigger (b): an epoch's age (§10).
    public static let rotationInterval: Duration = .seconds(600)
    /// Messages the rotation's initiator holds until `ROTATE_RESP` (§10).
    public static let rotationQueueCapacity = 64
    /// Handshake and key confirmation after the data channel opened (§7.5).
    public static let confirmationTimeout: Duration = .seconds(15)
    /// sentAt and every other integer: magnitude at most 2^53 (§13.1).
    public static let maxIntegerMagnitude: Int64 = 1 << 53
}
