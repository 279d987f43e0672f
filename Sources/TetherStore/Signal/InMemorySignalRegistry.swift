public import Dispatch
import TetherSync

/// The registry in RAM, shared by servers in one process: the test double of a cluster.
public final class InMemorySignalRegistry: SignalRegistry {
    private struct State {
        var leases: [String: (url: String, expiresAt: UInt64)] = [:]
        var holders: [String: String] = [:]
    }

    private let state = Locked(State())
    private let now: @Sendable () -> UInt64

    /// - Parameter now: monotonic milliseconds (tests pass their own clock).
    public init(now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds / 1_000_000 }) {
        self.now = now
    }

    private func live(_ node: String, _ state: State, at time: UInt64) -> Bool { (state.leases[node]?.expiresAt ?? 0) > time }

    public func renewLease(node: String, forwardURL: String, ttlMs: Int64) throws(StoreError) {
        let time = now()
        state.withLock { $0.leases[node] = (forwardURL, time + UInt64(max(0, ttlMs))) }
    }

    public func claim(_ id: String, node: String) throws(StoreError) -> Bool {
        let time = now()
        return state.withLock { state in
            if let holder = state.holders[id], holder != node, live(holder, state, at: time) { return false }
            state.holders[id] = node
            return true
        }
    }

    public func release(_ id: String, node: String) throws(StoreError) {
        state.withLock { state in
            if state.holders[id] == node { state.holders[id] = nil }
        }
    }

    public func locate(_ id: String) throws(StoreError) -> String? {
        let time = now()
        return state.withLock { state in
            guard let holder = state.holders[id], live(holder, state, at: time) else { return nil }
            return state.leases[holder]?.url
        }
    }

    public func online(_ ids: [String]) throws(StoreError) -> Set<String> {
        let time = now()
        return state.withLock { state in
            Set(ids.filter { id in state.holders[id].map { live($0, state, at: time) } ?? false })
        }
    }

    public func forget(node: String) throws(StoreError) {
        state.withLock { state in state.holders = state.holders.filter { $0.value != node } }
    }
}
