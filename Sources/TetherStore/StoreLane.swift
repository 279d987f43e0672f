import CTetherSystem
import Dispatch
import Foundation
import Synchronization
import TetherSync

/// One serial storage lane: a thread of its own running submitted work in FIFO order. Its own
/// thread rather than a dispatch queue so it can run at a lower scheduling priority than the
/// event loops: when a machine is saturated (a reconnect storm on one core), the kernel gives
/// the loops that splice the CPU first and storage the rest — storage is what can wait.
final class StoreLane: Sendable {
    private let queue = Locked<[@Sendable () -> Void]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = Atomic(false)

    /// Nice value of lane threads (loops run at the process's own, normally 0): a weight of about
    /// a tenth of a loop's under contention, and the whole CPU when the loops are idle.
    static let niceness: Int32 = 10

    init(name: String) {
        DedicatedThread.start(name: name, niceness: Self.niceness, joinable: false) { [self] in run() }
    }

    /// Queues `work` after everything queued before it.
    func async(_ work: @escaping @Sendable () -> Void) {
        if enqueue(work) { signal() }
    }

    /// Queues `work` without waking the thread; true when the queue was empty, so the caller must
    /// `signal()` (once, for however many it queues) for the work to run.
    func enqueue(_ work: @escaping @Sendable () -> Void) -> Bool {
        queue.withLock { queue in
            queue.append(work)
            return queue.count == 1
        }
    }

    /// Wakes the thread to run what is queued. Only the first item of a batch needs it: the
    /// thread takes the rest with it.
    func signal() { wake.signal() }

    /// Returns once everything queued before the call has run. Never call it from the lane itself.
    func sync() {
        let done = DispatchSemaphore(value: 0)
        // Always signalled: work queued ahead of this may still be waiting for the wake its
        // queuer defers to a flush point.
        _ = enqueue { done.signal() }
        signal()
        done.wait()
    }

    /// Lets the thread finish what is queued and exit.
    func stop() {
        stopped.store(true, ordering: .releasing)
        wake.signal()
    }

    private func run() {
        while true {
            wake.wait()
            let batch = queue.withLock { queue in
                defer { queue = [] }
                return queue
            }
            for work in batch { work() }
            if batch.isEmpty, stopped.load(ordering: .acquiring) { return }
        }
    }
}
