import Glibc

/// A point on the monotonic clock (CLOCK_MONOTONIC): what every deadline, window and timeout of
/// the services is measured on, because no step of the wall clock (NTP, an operator, a VM resume)
/// can move it. Its origin is arbitrary (boot, or a test's choice), so only differences and
/// comparisons mean anything; it is never persisted or sent.
///
/// Stored as nanoseconds in one `UInt64` (585 years from the origin) so the per-frame paths
/// compare and add plain integers; lengths of time are `Duration`.
@frozen
public struct MonotonicInstant: Sendable, Hashable, Comparable {
    public var nanoseconds: UInt64

    @inlinable
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// CLOCK_MONOTONIC, read with `clock_gettime` (one vDSO call).
    public static func now() -> MonotonicInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return MonotonicInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }

    /// The instant at the origin: earlier than any the clock returns.
    public static let zero = MonotonicInstant(nanoseconds: 0)

    @inlinable
    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// Later by `duration`; a negative duration moves earlier, never before the origin.
    @inlinable
    public static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        let delta = rhs.nanosecondsClamped
        return MonotonicInstant(nanoseconds: delta >= 0
            ? lhs.nanoseconds.addingClamped(UInt64(delta))
            : lhs.nanoseconds.subtractingClamped(delta.magnitude))
    }

    @inlinable
    public static func - (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant { lhs + (.zero - rhs) }

    @inlinable
    public static func += (lhs: inout MonotonicInstant, rhs: Duration) { lhs = lhs + rhs }

    /// How long after `rhs` this is (negative when earlier).
    @inlinable
    public static func - (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Duration {
        lhs >= rhs ? .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds) : .zero - .nanoseconds(rhs.nanoseconds &- lhs.nanoseconds)
    }

    /// How long since `earlier`, or zero when `earlier` is not earlier (a clock read on another
    /// thread a moment later can be).
    @inlinable
    public func elapsed(since earlier: MonotonicInstant) -> Duration {
        .nanoseconds(nanoseconds >= earlier.nanoseconds ? nanoseconds &- earlier.nanoseconds : 0)
    }
}

/// A point on the wall clock (CLOCK_REALTIME), at millisecond resolution: what is persisted,
/// signed or compared with another machine (record expiry, a quota day, a token's `iat`, a
/// client's timestamp window), since only wall time means the same after a restart or on another
/// node. Never used for a deadline: a wall-clock step would move it.
@frozen
public struct WallInstant: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z: the unit every store and wire field of Tether keeps.
    public var unixMilliseconds: UInt64

    @inlinable
    public init(unixMilliseconds: UInt64) { self.unixMilliseconds = unixMilliseconds }

    @inlinable
    public init(unixSeconds: Int64) { self.unixMilliseconds = UInt64(clamping: unixSeconds).multipliedClamped(by: 1000) }

    /// CLOCK_REALTIME, read with `clock_gettime` (no Foundation `Date`).
    public static func now() -> WallInstant {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return WallInstant(unixMilliseconds: UInt64(ts.tv_sec) &* 1000 &+ UInt64(ts.tv_nsec) / 1_000_000)
    }

    /// Whole seconds since 1970 (rounded down): JWT `iat`, signaling timestamps, TURN expiry.
    @inlinable
    public var unixSeconds: Int64 { Int64(unixMilliseconds / 1000) }

    @inlinable
    public static func < (lhs: WallInstant, rhs: WallInstant) -> Bool { lhs.unixMilliseconds < rhs.unixMilliseconds }

    /// Later by `duration` (to the millisecond, rounded down); never before 1970.
    @inlinable
    public static func + (lhs: WallInstant, rhs: Duration) -> WallInstant {
        let delta = rhs.millisecondsClamped
        return WallInstant(unixMilliseconds: delta >= 0
            ? lhs.unixMilliseconds.addingClamped(UInt64(delta))
            : lhs.unixMilliseconds.subtractingClamped(delta.magnitude))
    }

    @inlinable
    public static func - (lhs: WallInstant, rhs: Duration) -> WallInstant { lhs + (.zero - rhs) }

    /// How long after `rhs` this is (negative when earlier).
    @inlinable
    public static func - (lhs: WallInstant, rhs: WallInstant) -> Duration {
        lhs >= rhs ? .milliseconds(lhs.unixMilliseconds &- rhs.unixMilliseconds)
            : .zero - .milliseconds(rhs.unixMilliseconds &- lhs.unixMilliseconds)
    }
}

extension Duration {
    /// The length in whole nanoseconds, rounded toward zero and clamped to `Int64` (±292 years).
    @inlinable
    public var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowSum) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowSum ? (seconds < 0 ? .min : .max) : sum
    }

    /// The length in whole milliseconds, rounded toward zero and clamped to `Int64`: what a
    /// metric, a log line or a persisted field shows.
    @inlinable
    public var millisecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowSum) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return overflowSum ? (seconds < 0 ? .min : .max) : sum
    }

    /// The length in seconds as a `Double` (metrics exposition, human output).
    @inlinable
    public var secondsDouble: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension UInt64 {
    @inlinable
    func addingClamped(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    @inlinable
    func subtractingClamped(_ other: UInt64) -> UInt64 { self > other ? self &- other : 0 }

    @inlinable
    func multipliedClamped(by other: UInt64) -> UInt64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? .max : product
    }
}
