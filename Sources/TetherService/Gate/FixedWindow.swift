/// One fixed-window counter (relay.md §2.5, §3.4, §3.11): the window starts at the first hit and
/// restarts when `now − start > window`; every hit counts; a hit is allowed while the count is
/// at most `limit`. `limit` 0 means no limit.
///
/// 24 bytes: every resident room holds two, and the per-IP limiters one per address.
///
/// Inlinable: a room's frame-rate window is hit for every spliced frame, and a call across the
/// module boundary on that path would cost more than the check itself.
public struct FixedWindow: Sendable, Equatable {
    public let window: UInt64
    /// Valid while `count` > 0 (a window has started).
    @usableFromInline var start: UInt64 = 0
    @usableFromInline let limitBits: UInt32
    @usableFromInline var count: UInt32 = 0

    /// `limit` is clamped to 32 bits (billions of hits per window is no limit at all).
    @inlinable
    public init(limit: Int, window: UInt64) {
        limitBits = UInt32(clamping: limit)
        self.window = window
    }

    @inlinable
    public var limit: Int { Int(limitBits) }

    /// True once the current window is over (the next hit starts a new one).
    @inlinable
    public func isExpired(now: UInt64) -> Bool { count == 0 || now &- start > window }

    @inlinable
    public mutating func hit(now: UInt64) -> Bool {
        guard limitBits > 0 else { return true }
        if count > 0, now &- start <= window {
            if count < .max { count += 1 }
        } else {
            start = now
            count = 1
        }
        return count <= limitBits
    }
}
