import Synchronization
public import TetherNet
import TetherSync

/// A service's periodic work (housekeeping sweeps, metrics pushes, map polls), all on one loop,
/// each under a key: started at most once however often `start` is called, and never running
/// again once `stop` has returned.
public final class Chores<Key: Hashable & Sendable>: Sendable {
    /// The loop every chore runs on.
    public let loop: EventLoop
    private let running = Locked<[Key: Entry]>([:])
    private let generations = Atomic<UInt64>(0)

    private struct Entry {
        /// Which `start` this is: a timer of an earlier start (stopped since) never fires the new one.
        let generation: UInt64
        var timer: EventLoop.TimerID?
    }

    /// Chores on `loop`; none runs until started.
    public init(loop: EventLoop) { self.loop = loop }

    /// Runs `body` on the loop now (if `runNow`) and then every `interval`, until `stop`. A
    /// chore already running is left as it is (its interval and body too).
    public func start(_ key: Key, every interval: Duration, runNow: Bool = false, _ body: @escaping @Sendable () -> Void) {
        precondition(interval > .zero, "a chore needs an interval")
        let generation = generations.wrappingAdd(1, ordering: .relaxed).newValue
        let claimed = running.withLock { running in
            guard running[key] == nil else { return false }
            running[key] = Entry(generation: generation)
            return true
        }
        guard claimed else { return }
        onLoop { [self] in
            guard isCurrent(key, generation) else { return }
            if runNow { body() }
            schedule(key, generation, every: interval, body)
        }
    }

    /// Cancels the chore; when this returns its body is not running and will not run again.
    /// From another thread it waits for the loop (so never call it once the loop has stopped).
    public func stop(_ key: Key) {
        guard let entry = running.withLock({ $0.removeValue(forKey: key) }) else { return }
        cancel(entry.timer)
    }

    /// Stops every chore (shutdown).
    public func stopAll() {
        let entries = running.withLock { running in
            defer { running = [:] }
            return Array(running.values)
        }
        for entry in entries { cancel(entry.timer) }
    }

    /// Whether the chore under `key` is started and not stopped.
    public func isRunning(_ key: Key) -> Bool { running.withLock { $0[key] != nil } }

    private func schedule(_ key: Key, _ generation: UInt64, every interval: Duration, _ body: @escaping @Sendable () -> Void) {
        let timer = loop.schedule(after: interval) { [weak self] in
            guard let self, isCurrent(key, generation) else { return }
            body()
            schedule(key, generation, every: interval, body)
        }
        let kept = running.withLock { running in
            guard running[key]?.generation == generation else { return false }
            running[key]?.timer = timer
            return true
        }
        // Stopped while the body ran: the timer just made must not outlive the chore.
        if !kept { loop.cancel(timer) }
    }

    private func isCurrent(_ key: Key, _ generation: UInt64) -> Bool {
        running.withLock { $0[key]?.generation == generation }
    }

    /// Cancels on the loop, and waits for it unless already there: a body running now finishes
    /// before this returns, and `isCurrent` keeps any later firing from running it.
    private func cancel(_ timer: EventLoop.TimerID?) {
        if loop.inEventLoop {
            if let timer { loop.cancel(timer) }
            return
        }
        let loop = self.loop
        _ = try? loop.submitAndWait { if let timer { loop.cancel(timer) } }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }
}
