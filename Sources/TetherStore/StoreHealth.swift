import TetherSync

/// Whether a service's store is answering, as its calls find out: every failed call marks it
/// down, and the next call that succeeds marks it up again. `/readyz` reports it (a load balancer
/// then sends new clients to a node whose store answers) and the service logs only the changes —
/// a database that is down for a minute fails thousands of calls, and one line says so.
public final class StoreHealth: Sendable {
    /// A change of state worth one log line.
    public enum Change: Equatable, Sendable {
        case failing(StoreError)
        case recovered(failures: Int)
    }

    private struct State {
        var available = true
        /// Failed calls since the store was last seen answering.
        var failuresInOutage = 0
    }

    private let state = Locked(State())

    public init() {}

    /// False from a failed call until a call succeeds.
    public var isAvailable: Bool { state.withLock { $0.available } }

    /// Records a failed call; returns `.failing` when it is the first of an outage.
    @discardableResult
    public func failed(_ error: StoreError) -> Change? {
        state.withLock { state in
            state.failuresInOutage += 1
            guard state.available else { return nil }
            state.available = false
            return .failing(error)
        }
    }

    /// Records a call that succeeded; returns `.recovered` when it ends an outage.
    @discardableResult
    public func succeeded() -> Change? {
        state.withLock { state in
            guard !state.available else { return nil }
            defer { state = State() }
            return .recovered(failures: state.failuresInOutage)
        }
    }
}
