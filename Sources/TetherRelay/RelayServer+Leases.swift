import TetherSync
import TetherStore

extension RelayServer {
    /// Starts renewing this node's lease, if its store is one several nodes share, and listening
    /// for maps other nodes publish: a failover's map is adopted within milliseconds of its commit
    /// (the 1 s poll stays as the fallback), so survivors stop pointing at the dead node at once.
    func startLeases() {
        guard let leases = store as? any NodeLeases else { return }
        start(.lease, every: .milliseconds(LeaseRules.renewMs), runNow: true) { server in
            server.storage.submit(lane: 0) { _ in server.renewLease(leases) }
        }
        let watch = leases.watchShardMap { [weak self] in
            guard let self else { return }
            storage.submit(lane: 0) { [weak self] store in self?.adoptStoredMap(from: store) }
        }
        mapWatch.withLock { $0 = watch }
    }

    /// One renewal and, when this node is elected, one lease round (on lane 0). Whether this node
    /// may act on others' leases is decided by the database's clock inside the round
    /// (`LeaseRules`): a renewal that hung or failed breaks this node's continuity there, so a
    /// database that stalled and resumed never lets its first answered node take live nodes'
    /// buckets.
    func renewLease(_ leases: any NodeLeases) {
        let rules = leaseRules
        let started = clock.monotonic()
        do throws(StoreError) {
            renewed(try leases.renewLease(host: sharding.host, rules: rules), startedAt: started)
            storageAnswered()
            guard let round = try leases.leaseRound(host: sharding.host, rules: rules) else { return }
            let others = { (moved: [String]) in Set(round.map.hosts).subtracting(moved).sorted().joined(separator: ", ") }
            switch round.change {
            case let .failover(lapsed):
                write("relay: lease lapsed for \(lapsed.joined(separator: ", ")); shard map version \(round.map.version) moves their buckets to \(others(lapsed))")
            case let .restored(hosts):
                write("relay: \(hosts.joined(separator: ", ")) renewed for \(rules.restoreAfterMs / 1000) s after losing \(hosts.count == 1 ? "its" : "their") buckets; shard map version \(round.map.version) gives \(hosts.count == 1 ? "it" : "them") an even share back from \(others(hosts))")
            }
            adoptStoredMap(from: store)
        } catch {
            storageFailed(error)
        }
    }

    /// `RELAY_LEASE_TTL_MS`; a v1 cluster's nodes also take a share by themselves (`placesNewNodes`).
    var leaseRules: LeaseRules {
        var rules = LeaseRules(ttlMs: configuration.leaseTTLms)
        rules.placesNewNodes = configuration.cluster != nil
        return rules
    }

    /// A renewal that began at `started` succeeded: who is live now, and until when this node's
    /// own lease surely is — counted from before the call, since the database may have applied it
    /// at any moment after.
    func renewed(_ liveHosts: [String], startedAt started: MonotonicInstant) {
        sharding.setLiveHosts(Set(liveHosts), at: clock.monotonic())
        leaseSurelyLiveUntil.store((started + .milliseconds(configuration.leaseTTLms)).nanoseconds, ordering: .relaxed)
    }
}
