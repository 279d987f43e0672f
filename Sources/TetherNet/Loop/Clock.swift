import Glibc
import Synchronization

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
public final class ManualClock: NetClock, Sendable {
    private let current: Atomic<UInt64>

    public init(start: UInt64 = 1_000_000_000) { current = Atomic(start) }

    public func now() -> UInt64 { current.load(ordering: .acquiring) }

    public func advance(by nanoseconds: UInt64) { current.add(nanoseconds, ordering: .acquiringAndReleasing) }
}

public extension UInt64 {
    static func milliseconds(_ ms: UInt64) -> UInt64 { ms * 1_000_000 }
    static func seconds(_ s: UInt64) -> UInt64 { s * 1_000_000_000 }
}
