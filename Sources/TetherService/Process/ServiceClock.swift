import Glibc
public import TetherNet

/// Where a service reads the time: the system's clocks, or a test's. Deadlines, windows and
/// timeouts use the monotonic clock; only what is persisted or signed (record expiry, a token's
/// `iat`, a client's timestamp window) uses the wall clock, so a step of the wall clock never
/// closes or admits anything it should not.
public struct ServiceClock: Sendable {
    public let monotonicMs: @Sendable () -> UInt64
    public let wallMs: @Sendable () -> UInt64

    public init(monotonicMs: @escaping @Sendable () -> UInt64, wallMs: @escaping @Sendable () -> UInt64) {
        self.monotonicMs = monotonicMs
        self.wallMs = wallMs
    }

    /// CLOCK_MONOTONIC and CLOCK_REALTIME, read with `clock_gettime` (no Foundation `Date`).
    public static let system = ServiceClock(monotonicMs: { read(CLOCK_MONOTONIC) / 1_000_000 }, wallMs: { read(CLOCK_REALTIME) / 1_000_000 })

    /// CLOCK_MONOTONIC in nanoseconds (latency measurements).
    public static func monotonicNanoseconds() -> UInt64 { read(CLOCK_MONOTONIC) }

    private static func read(_ clock: clockid_t) -> UInt64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

extension ServiceClock {
    /// The monotonic clock as the network layer and the gate read it (nanoseconds).
    public var monotonicNetClock: some NetClock { MonotonicNetClock(clock: self) }
}

private struct MonotonicNetClock: NetClock {
    let clock: ServiceClock
    func now() -> UInt64 { clock.monotonicMs() &* 1_000_000 }
}
