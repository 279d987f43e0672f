import Foundation
import Synchronization
import TetherStore

/// Samples the relay's storage backlog (store calls submitted and not yet finished) every
/// millisecond and keeps the peak: how far the store fell behind the rooms' demand, which with a
/// fixed delay per call is what the storm's length comes from.
final class BacklogWatch: Sendable {
    private let peak = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)

    init(_ storage: RoomStoreExecutor) {
        let thread = Thread { [self] in
            while running.load(ordering: .relaxed) {
                let now = storage.backlog
                if now > peak.load(ordering: .relaxed) { peak.store(now, ordering: .relaxed) }
                usleep(1_000)
            }
            done.signal()
        }
        thread.start()
    }

    /// Stops sampling; returns the peak.
    func stop() -> Int {
        running.store(false, ordering: .relaxed)
        done.wait()
        return peak.load(ordering: .relaxed)
    }
}
