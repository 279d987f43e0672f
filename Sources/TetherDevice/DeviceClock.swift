import TetherSync

/// The SDK's monotonic time. Endpoints read the time and sleep only through one, so a test moves
/// time on (`ManualDeviceClock`) instead of waiting for it, and a deadline is an instant, never a
/// wall-clock date a clock step could move.
public protocol DeviceClock: Sendable {
    /// Now, on the monotonic clock.
    var now: ContinuousClock.Instant { get }
    /// Suspends until `deadline`; returns early only when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async
}

extension DeviceClock {
    /// Suspends for `duration` (none when it is not positive); returns early only when the task
    /// is cancelled.
    public func sleep(for duration: Duration) async {
        guard duration > .zero else { return }
        await sleep(until: now.advanced(by: duration))
    }
}

/// The process's monotonic clock: what every endpoint uses unless a test gives it another.
public struct SystemDeviceClock: DeviceClock {
    public init() {}

    public var now: ContinuousClock.Instant { ContinuousClock.now }

    public func sleep(until deadline: ContinuousClock.Instant) async {
        try? await Task.sleep(until: deadline, clock: .continuous)
    }
}

/// A clock that moves only when a test calls `advance`: every sleeper whose deadline it passes
/// wakes, in deadline order. Sleepers are bounded by the tasks the test starts.
public final class ManualDeviceClock: DeviceClock {
    private struct Sleeper {
        let id: Int
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: ContinuousClock.Instant
        var sleepers: [Sleeper] = []
        var nextID = 0
    }

    private let state: Locked<State>

    public init(start: ContinuousClock.Instant = ContinuousClock.now) { state = Locked(State(now: start)) }

    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// How many tasks are asleep on this clock: a test advances once the code it drives sleeps.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: ContinuousClock.Instant) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wakeNow = state.withLock { state -> Bool in
                    if state.now >= deadline || Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if wakeNow { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume()
        }
    }

    /// Moves the clock on by `duration` and wakes every sleeper whose deadline it reached.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}
