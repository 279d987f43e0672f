import CTetherSystem
import Glibc
import Synchronization
import TetherSync

/// N loops, each on its own thread.
public final class EventLoopGroup: Sendable {
    public let loops: [EventLoop]
    private let turns = Atomic<Int>(0)

    /// `count` loops (default: one per CPU).
    public init(count: Int? = nil, clock: any NetClock = MonotonicClock()) throws {
        // One loop per CPU the process may use: a relay pinned to one core (taskset, a cpuset)
        // gains nothing from a second loop, only thread switches and cross-loop handoffs.
        let count = count ?? Int(tether_usable_cpus())
        loops = try (0..<max(1, count)).map { try EventLoop(index: $0, clock: clock) }
        for loop in loops { loop.start() }
    }

    /// Loops in turn.
    public func next() -> EventLoop {
        loops[Int(UInt(bitPattern: turns.add(1, ordering: .relaxed).oldValue) % UInt(loops.count))]
    }

    /// The loop a stable 64-bit hash (a room's bucket, say) always maps to.
    public func loop(forHash hash: UInt64) -> EventLoop { loops[Int(hash % UInt64(loops.count))] }

    /// Stops every loop after it drains its queued tasks, and joins the threads.
    public func shutdown() {
        for loop in loops { loop.shutdown() }
    }
}

extension EventLoop {
    /// Runs `body` on this loop and waits for its result (never call from this loop).
    public func submitAndWait<R: Sendable>(_ body: @escaping @Sendable () throws -> R) throws -> R {
        precondition(!inEventLoop, "submitAndWait from the loop itself would deadlock")
        let done = ThreadSemaphore()
        let box = ResultBox<R>()
        execute {
            let result = Result { try body() }
            box.result.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try box.result.withLock { $0 }!.get()
    }
}

final class ResultBox<R: Sendable>: Sendable {
    let result = Locked<Result<R, any Error>?>(nil)
}
