public import TetherSync
import Synchronization

/// Where loops, timers and state machines read the monotonic clock, so tests can drive expiry
/// with `ManualClock`.
public protocol NetClock: Sendable {
    func now() -> MonotonicInstant
}

/// CLOCK_MONOTONIC.
public struct MonotonicClock: NetClock {
    public init() {}
    @inlinable
    public func now() -> MonotonicInstant { .now() }
}

/// A clock that moves only when told to.
public final class ManualClock: NetClock, Sendable {
    private let current: Atomic<UInt64>

    public init(start: MonotonicInstant = MonotonicInstant(nanoseconds: 1_000_000_000)) { current = Atomic(start.nanoseconds) }

    public func now() -> MonotonicInstant { MonotonicInstant(nanoseconds: current.load(ordering: .acquiring)) }

    public func advance(by duration: Duration) {
        current.add(UInt64(clamping: duration.nanosecondsClamped), ordering: .acquiringAndReleasing)
    }
}
