import TetherSync
/// Which Profile M registrations were renewed lately (push.md §2.5 step 7 renews on every
/// delivery). A renewal is a store write; a phone that gets a push a second would cost a write a
/// second for an expiry that moves by a second out of 180 days. So a registration is renewed at
/// most once per `interval`: its expiry is then 180 days after a delivery at most that much
/// older than its last one. Bounded: past `capacity` entries the oldest go (their next delivery
/// renews again, which is only a write). Used under the server's lock.
struct RenewalThrottle {
    /// An hour: the expiry drifts by at most 1/4,320 of the registration's life.
    static let interval: Duration = .seconds(3_600)
    let capacity: Int
    private var renewedAt: [String: MonotonicInstant] = [:]
    private var order: [(pushID: String, at: MonotonicInstant)] = []
    private var head = 0

    init(capacity: Int = 100_000) { self.capacity = capacity }

    /// Whether `pushID`, delivered at `now` (monotonic ms), should be renewed; records it if so.
    mutating func shouldRenew(_ pushID: String, now: MonotonicInstant) -> Bool {
        if let last = renewedAt[pushID], now >= last, now - last < Self.interval { return false }
        if renewedAt.count >= capacity { evictOldest() }
        renewedAt[pushID] = now
        order.append((pushID, now))
        compactIfStale()
        return true
    }

    /// Entries kept for eviction order (live ones and superseded ones not yet dropped).
    var orderCount: Int { order.count - head }

    /// A registration renewed hourly for months leaves a superseded entry each time, and below
    /// `capacity` nothing is evicted: once superseded entries outnumber live ones twice over, the
    /// order keeps only the live ones (amortised constant work per renewal).
    private mutating func compactIfStale() {
        guard order.count - head > 2 * renewedAt.count + 1_024 else { return }
        order = order[head...].filter { renewedAt[$0.pushID] == $0.at }
        head = 0
    }

    /// A deleted registration is forgotten (a new one with the same id is renewed at once).
    mutating func forget(_ pushID: String) { renewedAt[pushID] = nil }

    private mutating func evictOldest() {
        while head < order.count {
            let (pushID, at) = order[head]
            head += 1
            if renewedAt[pushID] == at {
                renewedAt[pushID] = nil
                break
            }
        }
        if head > 1_024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
