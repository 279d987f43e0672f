import Glibc

/// Monotonic time in nanoseconds. Loops, timers and state machines read time only through a
/// clock, so tests can drive expiry with `ManualClock`.
public protocol NetClock: Sendable {
    func now() -> UInt64
}

/// CLOCK_MONOTONIC.
public struct MonotonicClock: NetClock {
    public init() {}
    public func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// A clock that moves only when told to.
public final class ManualClock: NetClock, @unchecked Sendable {
    private let lock = NetLock()
    private var current: UInt64

    public init(start: UInt64 = 1_000_000_000) { current = start }

    public func now() -> UInt64 { lock.withLock { current } }

    public func advance(by nanoseconds: UInt64) { lock.withLock { current += nanoseconds } }
}

public extension UInt64 {
    static func milliseconds(_ ms: UInt64) -> UInt64 { ms * 1_000_000 }
    static func seconds(_ s: UInt64) -> UInt64 { s * 1_000_000_000 }
}
