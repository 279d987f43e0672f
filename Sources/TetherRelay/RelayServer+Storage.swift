import TetherStore

extension RelayServer {
    /// A store call failed. What needed it has already been refused with the spec's answer (close
    /// 1011 or 500 `internal error`), so this only keeps count: the metric, `/readyz`, and one log
    /// line per outage. It is not a process fault: a database that is down is a degraded state,
    /// not a reason to exit and drop every live splice.
    func storageFailed(_ error: StoreError) {
        metrics.storageFailed()
        if case .failing? = storageHealth.failed(error) {
            write("relay: storage unavailable: \(error.message); refusing what needs it (1011/500 internal error), splicing the rest", level: .error)
        }
    }

    /// During an outage, one write that leaves nothing behind (on the 1 s shard-map poll): a read
    /// is no proof, since a full disk answers reads and fails every write.
    func probeStorage(_ store: any RoomStore) {
        guard !storageHealth.isAvailable else { return }
        do throws(StoreError) {
            try store.probeWrite()
            storageAnswered()
        } catch {
            // Still failing: the outage was logged once, when it began.
        }
    }

    /// A store write succeeded (the probe or a lease renewal): ends an outage.
    func storageAnswered() {
        guard case let .recovered(failures)? = storageHealth.succeeded() else { return }
        metrics.storageAnswered()
        write("relay: storage available again (\(failures) calls failed meanwhile)")
    }
}
