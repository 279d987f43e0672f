/// The reconnect delay of the shipping clients (client.md §14): full jitter, attempt 1 uniform
/// in [0, 3 s], attempt n ≥ 2 uniform in [0, min(30, 2ⁿ) s] — upper bounds 3, 4, 8, 16, 30, 30 s.
/// Spreading the retries of many phones keeps a relay restart from becoming a thundering herd.
public struct ReconnectBackoff: Sendable {
    public static let cap: Duration = .seconds(30)

    /// The upper bound of attempt `n` (1-based).
    public static func bound(attempt n: Int) -> Duration {
        n <= 1 ? .seconds(3) : min(cap, .seconds(1 << min(n, 6)))
    }

    private var attempt = 0

    public init() {}

    /// The delay before the next attempt; `unit` draws from [0, 1].
    public mutating func next(unit: () -> Double = { Double.random(in: 0...1) }) -> Duration {
        attempt += 1
        return Self.bound(attempt: attempt) * unit()
    }

    /// After a re-resolve signal: the first retry goes at once (to the new owner), later ones
    /// back off, so nodes that disagree about the map for a moment are not hammered.
    public mutating func nextAfterReResolve(unit: () -> Double = { Double.random(in: 0...1) }) -> Duration {
        if attempt == 0 {
            attempt = 1
            return .zero
        }
        return next(unit: unit)
    }

    /// A connection held: the next failure starts over at attempt 1.
    public mutating func reset() { attempt = 0 }
}
