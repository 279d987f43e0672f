import TetherService
import TetherSync

/// Admission windows (relay.md §3.4 step 1) of rooms evicted while their window still ran, by the
/// room's per-process seeded hash, so that an attacker retrying on fresh sockets still meets the
/// 40-per-10 s limit after the room empties. Bounded: at most `capacity` windows; past it the
/// oldest kept goes first.
///
/// Every operation is O(1) amortised. A reconnect storm evicts thousands of rooms a second, each
/// within its window, so the table sits at its cap; sweeping it for expired windows on each
/// eviction (as a dictionary filter would) cost a whole loop iteration per eviction: a third of
/// the loop's CPU in the churn benchmark. Windows are kept in eviction order instead and leave
/// from the front once expired. A window starts before it is kept, so one that ran out may wait
/// behind an older one that still runs, at most one window length (all have one length); an
/// expired window taken back is simply a fresh one to the room.
struct EvictedWindows {
    /// Each kept window with the sequence number of its entry in `order`.
    private var windows: [Int: (window: FixedWindow, sequence: UInt64)] = [:]
    /// Keys in the order they were kept, oldest at `head`. An entry whose key was taken back, or
    /// kept again since, is stale (its sequence no longer matches) and is skipped when reached.
    private var order: [(key: Int, sequence: UInt64)] = []
    private var head = 0
    private var nextSequence: UInt64 = 0
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    var count: Int { windows.count }
    /// Entries in the eviction order, stale ones included (at most twice `capacity`, plus one).
    var queued: Int { order.count - head }
    var isEmpty: Bool { windows.isEmpty }

    /// The window kept for `key`, removed (its room is resident again and holds it).
    mutating func take(_ key: Int) -> FixedWindow? {
        windows.removeValue(forKey: key)?.window
    }

    /// Keeps `window` for `key` unless it has already run out; drops what has expired, and past
    /// `capacity` the oldest kept.
    mutating func keep(_ window: FixedWindow, for key: Int, now: MonotonicInstant) {
        dropExpired(now: now)
        guard !window.isExpired(now: now) else { return }
        if windows[key] == nil {
            while windows.count >= capacity, dropFront() {}
        }
        windows[key] = (window, nextSequence)
        order.append((key, nextSequence))
        nextSequence &+= 1
        compact()
    }

    /// Keeps `order` proportional to what it holds, amortised O(1) per entry. Stale entries
    /// (rooms taken back, or kept again) pile up behind a front window that still runs: past
    /// twice the capacity only the live ones stay (at most `capacity`, so this runs at most once
    /// per `capacity` keeps), and no live window is dropped for it. Otherwise the consumed
    /// prefix is reclaimed once it is half the buffer.
    private mutating func compact() {
        if order.count - head > 2 * capacity {
            order = order[head...].filter { windows[$0.key]?.sequence == $0.sequence }
            head = 0
        } else if head >= 1_024, head * 2 >= order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Drops front entries that are stale or whose window has run out.
    private mutating func dropExpired(now: MonotonicInstant) {
        while head < order.count {
            let front = order[head]
            if let kept = windows[front.key], kept.sequence == front.sequence, !kept.window.isExpired(now: now) { return }
            _ = dropFront()
        }
    }

    /// Removes the oldest entry (and its window, unless the entry is stale); false when empty.
    private mutating func dropFront() -> Bool {
        guard head < order.count else { return false }
        let front = order[head]
        head += 1
        if windows[front.key]?.sequence == front.sequence { windows.removeValue(forKey: front.key) }
        return true
    }
}
