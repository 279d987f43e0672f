import TetherNet

extension RelayServer {
    /// §6.3: the reference's per-room alarm cadence. One store-wide sweep at this cadence replaces
    /// per-room alarms, so a 30-day idle deadline needs no long timer: it can neither fire early
    /// nor spin, it is simply noticed by the first sweep after it passes (at most 15 s late).
    static let housekeepingIntervalMs: UInt64 = 15_000
    /// Rooms reaped per sweep; the rest wait for the next one, so a backlog never stalls a loop.
    static let reapBatch = 512

    func startHousekeeping() {
        let loop = group.loops[0]
        loop.execute { [self] in
            housekeepingTimer = loop.schedule(after: .milliseconds(Self.housekeepingIntervalMs)) { [weak self] in
                guard let self else { return }
                housekeep(now: Self.milliseconds())
                startHousekeeping()
            }
        }
    }

    func stopHousekeeping() {
        let loop = group.loops[0]
        _ = try? loop.submitAndWait { [self] in
            if let housekeepingTimer { loop.cancel(housekeepingTimer) }
            housekeepingTimer = nil
        }
    }

    /// One sweep (§6.4 steps 2–3): expired ephemeral records go, then every established room idle
    /// past `RELAY_ESTABLISHED_IDLE_TTL_MS` is torn down on its own loop — re-checked there, since
    /// a signed join or `/register` may have refreshed it meanwhile. (Step 1, the pre-auth
    /// deadline, is each resident room's own timer.)
    public func housekeep(now: UInt64) {
        store.pruneExpired(now: now)
        let ttl = UInt64(configuration.establishedIdleTTLms)
        guard now > ttl else { return }
        let cutoff = now - ttl
        for room in store.idleRooms(lastActivityBefore: cutoff, limit: Self.reapBatch) {
            let index = room.bucket % group.loops.count
            let table = rooms[index]
            group.loops[index].execute { [self] in
                guard let last = store.lastActivity(of: room), last < cutoff else { return }
                write("relay \(room.logTag) teardown reason=room expired")
                store.deleteRoom(room)
                table.closeRoom(room, code: 1000, reason: "room expired")
            }
        }
    }
}
