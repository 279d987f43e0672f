import TetherNet
import TetherStore
public import TetherSync

extension RelayServer {
    /// §6.3: the reference's per-room alarm cadence. One store-wide sweep at this cadence replaces
    /// per-room alarms, so a 30-day idle deadline needs no long timer: it can neither fire early
    /// nor spin, it is simply noticed by the first sweep after it passes (at most 15 s late).
    static let housekeepingInterval: Duration = .seconds(15)
    /// Rooms reaped per sweep; the rest wait for the next one, so a backlog never stalls a loop.
    static let reapBatch = 512

    func startHousekeeping() {
        start(.housekeeping, every: Self.housekeepingInterval) { $0.housekeep(now: $0.clock.wall()) }
    }

    /// One sweep (§6.4 steps 2–3), all of it storage work, so none of it on a loop: expired
    /// ephemeral records go (on lane 0), then every established room idle past
    /// `RELAY_ESTABLISHED_IDLE_TTL_MS` is re-checked and deleted on its own store lane — after any
    /// signed join or `/register` of that room already queued there — and its sockets are closed
    /// on its loop. (Step 1, the pre-auth deadline, is each resident room's own timer.) `now` is
    /// wall time (activity is persisted); `done` runs once every part has finished.
    public func housekeep(now wall: WallInstant, done: (@Sendable () -> Void)? = nil) {
        storage.submit(lane: 0) { [self] store in
            let ttl = UInt64(configuration.establishedIdleTTLms), now = wall.unixMilliseconds
            let idle: [RoomKey]
            do throws(StoreError) {
                try store.pruneExpired(now: now)
                idle = now > ttl ? try store.idleRooms(lastActivityBefore: now - ttl, limit: Self.reapBatch) : []
            } catch {
                // The next sweep tries again; nothing is reaped on a read that did not happen.
                storageFailed(error)
                done?()
                return
            }
            guard !idle.isEmpty else { done?(); return }
            let cutoff = now - ttl
            let remaining = Countdown(idle.count, then: done)
            for key in idle {
                storage.submit(key) { [self] store in
                    do throws(StoreError) {
                        guard let last = try store.lastActivity(of: key), last < cutoff else { return remaining.finish() }
                        try store.deleteRoom(key)
                    } catch {
                        storageFailed(error)
                        return remaining.finish()
                    }
                    write("relay \(key.logTag) teardown reason=room expired")
                    let index = key.bucket % group.loops.count
                    let table = rooms[index]
                    group.loops[index].execute {
                        // The store names rooms only by key: match it against the loop's resident
                        // rooms (the bucket test is a cheap filter; only rooms that pass are hashed).
                        table.closeRooms { room in room.bucket == key.bucket && RoomKey(room) == key ? (1000, "room expired") : nil }
                        remaining.finish()
                    }
                }
            }
        }
    }
}

/// Calls `then` when `finish` has been called `count` times, from any threads.
final class Countdown: Sendable {
    private let left: Locked<Int>
    private let then: (@Sendable () -> Void)?

    init(_ count: Int, then: (@Sendable () -> Void)?) {
        left = Locked(count)
        self.then = then
    }

    func finish() {
        let last = left.withLock { left in
            left -= 1
            return left == 0
        }
        if last { then?() }
    }
}
