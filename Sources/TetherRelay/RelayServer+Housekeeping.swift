import TetherNet

extension RelayServer {
    /// §6.3: the reference's per-room alarm cadence. One store-wide sweep at this cadence replaces
    /// per-room alarms, so a 30-day idle deadline needs no long timer: it can neither fire early
    /// nor spin, it is simply noticed by the first sweep after it passes (at most 15 s late).
    static let housekeepingIntervalMs: UInt64 = 15_000
    /// Rooms reaped per sweep; the rest wait for the next one, so a backlog never stalls a loop.
    static let reapBatch = 512

    func startHousekeeping() {
        start(.housekeeping, every: Self.housekeepingIntervalMs) { $0.housekeep(now: Self.milliseconds()) }
    }

    func stopHousekeeping() { stop(.housekeeping) }

    /// One sweep (§6.4 steps 2–3): expired ephemeral records go, then every established room idle
    /// past `RELAY_ESTABLISHED_IDLE_TTL_MS` is torn down on its own loop — re-checked there, since
    /// a signed join or `/register` may have refreshed it meanwhile. (Step 1, the pre-auth
    /// deadline, is each resident room's own timer.) The store names rooms only by key, so each
    /// loop matches the keys against its resident rooms to close their sockets.
    public func housekeep(now: UInt64) {
        store.pruneExpired(now: now)
        let ttl = UInt64(configuration.establishedIdleTTLms)
        guard now > ttl else { return }
        let cutoff = now - ttl
        let byLoop = Dictionary(grouping: store.idleRooms(lastActivityBefore: cutoff, limit: Self.reapBatch)) { $0.bucket % group.loops.count }
        for (index, keys) in byLoop {
            let table = rooms[index]
            group.loops[index].execute { [self] in
                let expired = Set(keys.filter { key in store.lastActivity(of: key).map { $0 < cutoff } ?? false })
                for key in expired {
                    write("relay \(key.logTag) teardown reason=room expired")
                    store.deleteRoom(key)
                }
                guard !expired.isEmpty else { return }
                let buckets = Set(expired.map(\.bucket))
                table.closeRooms { room in
                    // The bucket test is a cheap filter; only rooms that pass it are hashed.
                    buckets.contains(room.bucket) && expired.contains(RoomKey(room)) ? (1000, "room expired") : nil
                }
            }
        }
    }
}
