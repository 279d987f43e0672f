public import TetherSync

/// One fixed-window counter (relay.md §2.5, §3.4, §3.11): the window starts at the first hit and
/// restarts when `now − start > window`; every hit counts; a hit is allowed while the count is
/// at most `limit`. `limit` 0 means no limit.
///
/// 24 bytes: every resident room holds two, and the per-IP limiters one per address.
///
/// Inlinable: a room's frame-rate window is hit for every spliced frame, and a call across the
/// module boundary on that path would cost more than the check itself.
public struct FixedWindow: Sendable, Equatable {
    /// The window's length in nanoseconds: kept as the integer the per-frame check compares with.
    @usableFromInline let windowNanoseconds: UInt64
    @usableFromInline var start = MonotonicInstant.zero
    @usableFromInline let limitBits: UInt32
    @usableFromInline var count: UInt32 = 0

    /// A counter allowing `limit` hits per `window` (`limit` 0: every hit is allowed).
    @inlinable
    public init(limit: Int, window: Duration) {
        limitBits = UInt32(clamping: limit)
        windowNanoseconds = UInt64(clamping: window.nanosecondsClamped)
    }

    /// The hits allowed per window; 0 means no limit.
    @inlinable
    public var limit: Int { Int(limitBits) }

    /// The window's length.
    public var window: Duration { .nanoseconds(windowNanoseconds) }

    /// Whether the window has lapsed at `now` (or never started), so the counter holds nothing
    /// worth keeping.
    @inlinable
    public func isExpired(now: MonotonicInstant) -> Bool { count == 0 || now.nanoseconds &- start.nanoseconds > windowNanoseconds }

    /// Counts a hit at `now` and returns whether it is allowed; refused hits count too.
    @inlinable
    public mutating func hit(now: MonotonicInstant) -> Bool {
        guard limitBits > 0 else { return true }
        if count > 0, now.nanoseconds &- start.nanoseconds <= windowNanoseconds {
            if count < .max { count += 1 }
        } else {
            start = now
            count = 1
        }
        return count <= limitBits
    }
}
