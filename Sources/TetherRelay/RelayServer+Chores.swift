import TetherService

extension RelayServer {
    /// The relay's periodic work, all on the first loop (the chassis' `Chores`).
    enum Chore: Hashable, Sendable {
        case housekeeping, metricsPush, shardMapPoll, lease
    }

    /// Runs `body` now (if `runNow`) and then every `intervalMs`, until the chores stop. The
    /// relay is held weakly: a chore never keeps a stopped relay alive.
    func start(_ chore: Chore, every interval: Duration, runNow: Bool = false, _ body: @escaping @Sendable (RelayServer) -> Void) {
        chores.start(chore, every: interval, runNow: runNow) { [weak self] in
            if let self { body(self) }
        }
    }
}
