public import TetherSync

/// A per-key fixed-window rate limiter (relay.md §2.5), with time passed in so it is tested
/// without a clock.
///
/// A key's window starts at its first hit and restarts when `now − start > window` (strictly
/// greater). Every hit counts, refused ones included; a hit is refused once the count exceeds
/// `limit`. At most `maxKeys` keys are held: past that, expired windows are swept, then the
/// oldest-inserted keys evicted (which briefly fails open for them, as the reference does).
public struct FixedWindowLimiter<Key: Hashable & Sendable>: Sendable {
    /// The hits allowed per key and window; 0 turns the limiter off.
    public let limit: Int
    /// The window's length.
    public let window: Duration
    /// The most keys held at once.
    public let maxKeys: Int

    private struct Bucket: Sendable {
        var window: FixedWindow
        let order: UInt64
    }

    private var buckets: [Key: Bucket] = [:]
    /// Insertion order, for eviction (keys may be stale; checked against `order`).
    private var insertions: [(key: Key, order: UInt64)] = []
    private var insertionHead = 0
    private var nextOrder: UInt64 = 0
    private var lastSweep: MonotonicInstant?

    /// A limiter allowing each key `limit` hits per `window`.
    ///
    /// - Parameters:
    ///   - limit: hits allowed per window; 0 turns the limiter off.
    ///   - window: the window's length.
    ///   - maxKeys: the most keys held at once (past it, expired windows are swept, then the
    ///     oldest keys evicted).
    public init(limit: Int, window: Duration, maxKeys: Int = 50_000) {
        precondition(limit >= 0 && window > .zero && maxKeys > 0)
        self.limit = limit
        self.window = window
        self.maxKeys = maxKeys
    }

    /// Whether the limiter limits anything (`limit` above 0).
    public var isEnabled: Bool { limit > 0 }
    /// How many keys are held now.
    public var keyCount: Int { buckets.count }

    /// Records a hit for `key` at `now`; returns true if it is allowed.
    public mutating func hit(_ key: Key, now: MonotonicInstant) -> Bool {
        guard isEnabled else { return true }
        if buckets[key] == nil {
            if buckets.count >= maxKeys { makeRoom(now: now) }
            nextOrder += 1
            buckets[key] = Bucket(window: FixedWindow(limit: limit, window: window), order: nextOrder)
            insertions.append((key, nextOrder))
        }
        return buckets[key]!.window.hit(now: now)
    }

    private mutating func makeRoom(now: MonotonicInstant) {
        // A full sweep is O(keys); under a flood of new keys it runs at most once per window,
        // and eviction of the oldest does the rest in amortised O(1).
        if lastSweep.map({ now.elapsed(since: $0) > window }) ?? true {
            lastSweep = now
            buckets = buckets.filter { !$0.value.window.isExpired(now: now) }
        }
        while buckets.count >= maxKeys, insertionHead < insertions.count {
            let oldest = insertions[insertionHead]
            insertionHead += 1
            if buckets[oldest.key]?.order == oldest.order { buckets[oldest.key] = nil }
        }
        // Drop stale insertion records now and then, so the list stays proportional to the map.
        if insertionHead > maxKeys {
            insertions = insertions[insertionHead...].filter { buckets[$0.key]?.order == $0.order }
            insertionHead = 0
        }
    }
}
