/// One fixed-window counter (relay.md §2.5, §3.4, §3.11): the window starts at the first hit and
/// restarts when `now − start > window`; every hit counts; a hit is allowed while the count is
/// at most `limit`. `limit` 0 means no limit.
public struct FixedWindow: Sendable, Equatable {
    public let limit: Int
    public let window: UInt64
    private var start: UInt64?
    private var count = 0

    public init(limit: Int, window: UInt64) {
        self.limit = limit
        self.window = window
    }

    /// True once the current window is over (the next hit starts a new one).
    public func isExpired(now: UInt64) -> Bool { start.map { now &- $0 > window } ?? true }

    public mutating func hit(now: UInt64) -> Bool {
        guard limit > 0 else { return true }
        if let start, now &- start <= window {
            count += 1
        } else {
            start = now
            count = 1
        }
        return count <= limit
    }
}
