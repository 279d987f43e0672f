public import TetherSync

/// The process-protection rule of relay.md §7.1, for every service: internal faults are survived, but more than
/// `limit` of them within `window` means the process is unhealthy (a broken disk, a corrupt
/// database) and should exit for a clean supervisor restart rather than limp on. A sliding window
/// over the last `limit + 1` fault times, so a burst straddling a window edge still counts.
///
/// A value: the service keeps it under its own lock, beside the "exceeded once" flag.
public struct FaultBudget: Sendable, Equatable {
    /// How many faults are survived within `window`; one more means exit.
    public let limit: Int
    /// The sliding window the faults are counted over.
    public let window: Duration
    private var times: [MonotonicInstant] = []

    /// The reference's figures: more than 25 within 60 s.
    public init(limit: Int = 25, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    /// Records a fault at `now`; true when this one exceeds the budget.
    public mutating func record(now: MonotonicInstant) -> Bool {
        times.append(now)
        if times.count > limit + 1 { times.removeFirst(times.count - limit - 1) }
        guard times.count > limit, let oldest = times.first else { return false }
        return now.elapsed(since: oldest) < window
    }
}
