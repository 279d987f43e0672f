import TetherNet

extension RelayServer {
    /// The relay's periodic work, all on the first loop.
    enum Chore: Hashable {
        case housekeeping, metricsPush, shardMapPoll
    }

    /// Runs `body` on the first loop now (if `runNow`) and then every `intervalMs`, until
    /// `stop(_:)`. A chore that is already scheduled is not scheduled twice.
    func start(_ chore: Chore, every intervalMs: UInt64, runNow: Bool = false, _ body: @escaping @Sendable (RelayServer) -> Void) {
        let loop = group.loops[0]
        loop.execute { [self] in
            guard chores[chore] == nil else { return }
            if runNow { body(self) }
            schedule(chore, every: intervalMs, body)
        }
    }

    private func schedule(_ chore: Chore, every intervalMs: UInt64, _ body: @escaping @Sendable (RelayServer) -> Void) {
        chores[chore] = group.loops[0].schedule(after: .milliseconds(intervalMs)) { [weak self] in
            guard let self, chores[chore] != nil else { return }
            body(self)
            schedule(chore, every: intervalMs, body)
        }
    }

    /// Cancels the chore and waits until the first loop has done so.
    func stop(_ chore: Chore) {
        let loop = group.loops[0]
        _ = try? loop.submitAndWait { [self] in
            if let timer = chores.removeValue(forKey: chore) { loop.cancel(timer) }
        }
    }
}
