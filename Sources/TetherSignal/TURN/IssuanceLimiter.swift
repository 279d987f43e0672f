import Synchronization

/// The per-process issuance limits of signaling.md §8.1 [DOC]: at most 8 issuances at once and
/// 60 started per minute (a fixed window from the first counted start, §13.1). An issuance
/// counts when it starts, whatever its outcome.
public final class IssuanceLimiter: Sendable {
    public static let maxConcurrent = 8
    public static let perWindow = 60
    public static let windowMs: UInt64 = 60_000

    private struct State {
        var inFlight = 0
        var windowStart: UInt64?
        var started = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Takes a place for one issuance at `nowMs` (monotonic); false when over either limit.
    public func start(nowMs: UInt64) -> Bool {
        state.withLock { state in
            if let start = state.windowStart, nowMs &- start >= Self.windowMs { state.windowStart = nil }
            guard state.inFlight < Self.maxConcurrent else { return false }
            if state.windowStart == nil {
                state.windowStart = nowMs
                state.started = 0
            }
            guard state.started < Self.perWindow else { return false }
            state.started += 1
            state.inFlight += 1
            return true
        }
    }

    /// Gives back the place of an issuance that finished (or was abandoned).
    public func finish() {
        state.withLock { $0.inFlight -= 1 }
    }

    public var inFlight: Int { state.withLock { $0.inFlight } }
}
