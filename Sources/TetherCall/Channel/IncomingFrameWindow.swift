import TetherSync
/// The receiver's rate rule (signaling.md §9.6): fixed windows that start at the first frame
/// counted and end when `now − start > window` (strictly, as relay.md §2.5 and §13.1's rate
/// windows); the frame that makes `limit + 1` in one window fails.
struct IncomingFrameWindow: Sendable {
    let limit: Int
    let window: Duration
    private var start = MonotonicInstant.zero
    private var count = 0

    init(limit: Int, window: Duration) {
        self.limit = limit
        self.window = window
    }

    /// Counts one frame at `now`; false when it exceeds the limit.
    mutating func admit(now: MonotonicInstant) -> Bool {
        if count == 0 || now < start || now - start > window {
            start = now
            count = 0
        }
        count += 1
        return count <= limit
    }
}
