public import TetherNet
public import TetherSync

/// Where a service reads the time: the system's clocks, or a test's. Deadlines, windows and
/// timeouts use the monotonic clock; only what is persisted or signed (record expiry, a token's
/// `iat`, a client's timestamp window) uses the wall clock, so a step of the wall clock never
/// closes or admits anything it should not.
public struct ServiceClock: NetClock {
    /// The monotonic clock: deadlines, windows and timeouts.
    public let monotonic: @Sendable () -> MonotonicInstant
    /// The wall clock: what is persisted or signed.
    public let wall: @Sendable () -> WallInstant

    /// A clock reading `monotonic` and `wall` (a test's, or the system's through ``system``).
    public init(monotonic: @escaping @Sendable () -> MonotonicInstant, wall: @escaping @Sendable () -> WallInstant) {
        self.monotonic = monotonic
        self.wall = wall
    }

    /// CLOCK_MONOTONIC and CLOCK_REALTIME, read with `clock_gettime` (no Foundation `Date`).
    public static let system = ServiceClock(monotonic: { .now() }, wall: { .now() })

    /// The monotonic clock, as loops and the gate read it.
    public func now() -> MonotonicInstant { monotonic() }
}
