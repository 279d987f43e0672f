
import Synchronization

/// Runs storage off the event loops. A store call blocks (SQLite fsyncs a verifier; a networked
/// database answers in a millisecond or more), so a service never makes one on a loop thread: it
/// submits the work here, and the work posts its answer back to the loop that asked. Generic over
/// the store a service uses (`any RoomStore` for the relay, `any PushStore` for the push relay).
///
/// Work runs on `lanes` serial lanes (threads of their own, below the loops' priority). A room's
/// work always goes to the same lane (by its key's
/// bucket), so one room's reads and writes run one at a time in the order the room submitted them
/// — which, with the room's own one-query-at-a-time rule, is relay.md §6.9's per-room
/// serialisation — while different rooms' work runs in parallel up to the lane count.
public final class StoreExecutor<Store: Sendable>: Sendable {
    public let store: Store
    private let lanes: [StoreLane]
    private let queued = Atomic<Int>(0)

    /// Lanes a relay uses by default: storage work is mostly waiting (on fsync, or on the
    /// network), so a few more lanes than cores keep a slow store from queueing every room behind
    /// one call, and few enough that SQLite's single connection is not fought over.
    public static var defaultLanes: Int { 4 }

    public init(store: Store, lanes: Int = StoreExecutor.defaultLanes) {
        self.store = store
        self.lanes = (0..<max(1, lanes)).map { StoreLane(name: "tether-store-\($0)") }
    }

    /// The lanes' threads exit once their queued work has run (a server that is shut down).
    deinit {
        for lane in lanes { lane.stop() }
    }

    public var laneCount: Int { lanes.count }

    /// Runs `work` on the room's lane, after everything submitted for that lane before it.
    public func submit(_ room: RoomKey, _ work: @escaping @Sendable (Store) -> Void) {
        submit(lane: room.bucket % lanes.count, work)
    }

    /// Runs `work` on lane `lane` (housekeeping and the shard map use lane 0).
    public func submit(lane: Int, _ work: @escaping @Sendable (Store) -> Void) {
        queued.add(1, ordering: .relaxed)
        lanes[lane % lanes.count].async { [self] in
            work(store)
            queued.subtract(1, ordering: .relaxed)
        }
    }

    /// Queues `work` on the room's lane like `submit`, but leaves the wake to the caller: returns
    /// the lane to `wake(lane:)` if it needs one. A loop queues its storage this way and wakes
    /// each lane once per flush point — one thread wake-up for a burst, not one per room.
    public func enqueue(_ room: RoomKey, _ work: @escaping @Sendable (Store) -> Void) -> Int? {
        queued.add(1, ordering: .relaxed)
        let lane = room.bucket % lanes.count
        let first = lanes[lane].enqueue { [self] in
            work(store)
            queued.subtract(1, ordering: .relaxed)
        }
        return first ? lane : nil
    }

    /// Wakes a lane `enqueue` named.
    public func wake(lane: Int) { lanes[lane].signal() }

    /// Storage work submitted and not yet finished (a gauge: a growing figure means the store is
    /// slower than the relay's demand).
    public var backlog: Int { queued.load(ordering: .relaxed) }

    /// Waits until everything submitted so far has run (graceful shutdown flushes the quota
    /// counts and the last writes before the process exits). Never call it on an event loop.
    public func drain() {
        for lane in lanes { lane.sync() }
    }
}

/// The relay's executor: a room's work runs on the lane of its key's bucket.
public typealias RoomStoreExecutor = StoreExecutor<any RoomStore>
