/// "Now", as a call needs it: two clocks for two jobs. Every deadline of §7.5 reads the monotonic
/// clock, which a wall-clock step cannot move; only the TURN credential margin compares against
/// `iceExpiresAt`, which the server states in UNIX seconds (§5.3), so it reads wall time.
public struct CallTime: Sendable, Equatable {
    /// Monotonic nanoseconds (any origin): the clock `CallSecureChannel` runs on.
    public var monotonic: UInt64
    /// Wall-clock UNIX seconds.
    public var unixSeconds: Int64

    public init(monotonic: UInt64, unixSeconds: Int64) {
        self.monotonic = monotonic
        self.unixSeconds = unixSeconds
    }
}
