import TetherService
public import TetherSync

/// The per-process issuance limits of signaling.md §8.1 [DOC]: at most 8 issuances at once and
/// 60 started per minute (a fixed window from the first counted start, §13.1). An issuance
/// counts when it starts, whatever its outcome.
public final class IssuanceLimiter: Sendable {
    /// Issuances running at once, at most.
    public static let maxConcurrent = 8
    /// Issuances started per ``window``, at most.
    public static let perWindow = 60
    /// The window of ``perWindow``.
    public static let window: Duration = .seconds(60)

    private struct State {
        var inFlight = 0
        /// Restarts when `now − start > window`, strictly, as every window of relay.md §2.5.
        var window = FixedWindow(limit: IssuanceLimiter.perWindow, window: IssuanceLimiter.window)
    }

    private let state = Locked(State())

    /// A limiter with nothing running.
    public init() {}

    /// Takes a place for one issuance at `nowMs` (monotonic); false when over either limit. One
    /// refused for the concurrency limit does not count toward the window.
    public func start(now: MonotonicInstant) -> Bool {
        state.withLock { state in
            guard state.inFlight < Self.maxConcurrent, state.window.hit(now: now) else { return false }
            state.inFlight += 1
            return true
        }
    }

    /// Gives back the place of an issuance that finished (or was abandoned).
    public func finish() {
        state.withLock { $0.inFlight -= 1 }
    }

    /// Issuances running now.
    public var inFlight: Int { state.withLock { $0.inFlight } }
}
