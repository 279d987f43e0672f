import TetherSync

/// What `/readyz` asks: named checks a service registers (the store answers, the shard map is
/// loaded, not draining). Ready when every check passes; otherwise the failing names are the
/// answer, so an operator knows what to look at.
public final class ReadinessChecks: Sendable {
    private let checks = Locked<[(name: String, check: @Sendable () -> Bool)]>([])

    /// No checks yet: ready until one is added.
    public init() {}

    /// Adds a check; `check` runs at each `/readyz`, on the admin listener's loop, so it must be
    /// quick and never block (read a flag another thread keeps, not the database itself).
    public func register(_ name: String, _ check: @escaping @Sendable () -> Bool) {
        precondition(!name.isEmpty && !name.contains(where: \.isNewline), "a readiness check has a one-line name")
        checks.withLock { $0.append((name, check)) }
    }

    /// The names of the checks failing now, in registration order.
    public func failing() -> [String] {
        // Run outside the lock: a check may take locks of its own.
        checks.withLock { $0 }.filter { !$0.check() }.map(\.name)
    }
}
