import CTetherSystem
import Glibc

/// N loops, each on its own thread.
public final class EventLoopGroup: @unchecked Sendable {
    public let loops: [EventLoop]
    private let counter = NetLock()
    private var nextIndex = 0

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
        counter.withLock {
            defer { nextIndex = (nextIndex + 1) % loops.count }
            return loops[nextIndex]
        }
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
        let done = DispatchSemaphoreLite()
        let box = ResultBox<R>()
        execute {
            box.result = Result { try body() }
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }
}

final class ResultBox<R>: @unchecked Sendable {
    var result: Result<R, any Error>?
}

/// A counting semaphore on a pthread condition variable. The mutex and condition live in
/// their own heap allocations: pthread needs them at fixed addresses, which a class's stored
/// property passed by `&` is not promised to be.
final class DispatchSemaphoreLite: @unchecked Sendable {   // `value` is only touched under `mutex`
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var value = 0

    init() {
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func signal() {
        pthread_mutex_lock(mutex)
        value += 1
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    func wait() {
        pthread_mutex_lock(mutex)
        while value == 0 { pthread_cond_wait(condition, mutex) }
        value -= 1
        pthread_mutex_unlock(mutex)
    }
}
