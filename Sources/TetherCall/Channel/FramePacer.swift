import TetherSync
/// Sender pacing (signaling.md §13.1): frames leave in order, never more than `limit` in any
/// `window`. The peer counts in fixed windows that include both ends (`now − start > window`
/// starts the next) and closes on the 41st frame; a sliding bound over closed windows on this
/// side keeps every one of the peer's within the limit, wherever it starts, once `window`
/// exceeds the peer's by the delivery jitter to absorb (`CallChannelLimits.pacingWindow`).
struct FramePacer: Sendable {
    let limit: Int
    let window: Duration
    /// When each of the last `limit` frames left; once full, `oldest` indexes the earliest.
    private var released: [MonotonicInstant] = []
    private var oldest = 0
    private var waiting: [[UInt8]] = []
    private var head = 0

    init(limit: Int, window: Duration) {
        self.limit = limit
        self.window = window
        released.reserveCapacity(limit)
    }

    var isEmpty: Bool { head == waiting.count }
    var count: Int { waiting.count - head }

    mutating func enqueue(_ frame: [UInt8]) { waiting.append(frame) }

    /// The frames that may leave at `now`, in order.
    mutating func release(now: MonotonicInstant) -> [[UInt8]] {
        var out: [[UInt8]] = []
        while head < waiting.count, mayRelease(now: now) {
            record(now)
            out.append(waiting[head])
            waiting[head] = []
            head += 1
        }
        if head == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64, head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        return out
    }

    /// When the next waiting frame may leave (nil when none waits).
    var nextRelease: MonotonicInstant? {
        guard !isEmpty else { return nil }
        return released.count < limit ? .zero : released[oldest] + window + .nanoseconds(1)
    }

    /// Drops every waiting frame (termination).
    mutating func discard() {
        waiting = []
        head = 0
    }

    private func mayRelease(now: MonotonicInstant) -> Bool {
        released.count < limit || now > released[oldest] + window
    }

    private mutating func record(_ now: MonotonicInstant) {
        if released.count < limit {
            released.append(now)
        } else {
            released[oldest] = now
            oldest = (oldest + 1) % limit
        }
    }
}
