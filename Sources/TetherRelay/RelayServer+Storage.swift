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

    /// A store call succeeded (the 1 s shard-map read is the steady probe): ends an outage.
    func storageAnswered() {
        guard case let .recovered(failures)? = storageHealth.succeeded() else { return }
        metrics.storageAnswered()
        write("relay: storage available again (\(failures) calls failed meanwhile)")
    }
}
