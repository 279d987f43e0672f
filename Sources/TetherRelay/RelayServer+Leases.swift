import Synchronization
import TetherStore

extension RelayServer {
    /// How often a node renews its lease (and, when elected, runs a failover round): a tenth or
    /// less of any sensible lease, so a few lost renewals never cost a live node its buckets.
    static let leaseRenewMs: UInt64 = 1_000

    /// After a database outage a live node may reconnect as late as the pool's longest back-off
    /// after another: a node that waited only one lease before failing others over took the
    /// buckets of a node that was alive and still backing off (seen under load with a 3 s lease).
    /// So a node takes part in failover once it has renewed for a lease and this much more.
    static let reconnectGraceMs = PostgresPool.maxBackoffNanos / 1_000_000

    /// Starts renewing this node's lease, if its store is one several nodes share.
    func startLeases() {
        guard let leases = store as? any NodeLeases else { return }
        start(.lease, every: Self.leaseRenewMs, runNow: true) { server in
            server.storage.submit(lane: 0) { _ in server.renewLease(leases) }
        }
    }

    /// One renewal, on lane 0. A node takes part in failover only once it has renewed without a
    /// failure for a whole lease (and `reconnectGraceMs`): after a database outage every node's lease has lapsed by the
    /// database's clock, and the first node back must not take the buckets of nodes that are
    /// alive but have not renewed yet.
    func renewLease(_ leases: any NodeLeases) {
        let ttl = configuration.leaseTTLms
        let now = clock.monotonicMs()
        do throws(StoreError) {
            try leases.renewLease(host: sharding.host, ttlMs: ttl)
            storageAnswered()
            let since = leaseHealthySince.withLock { since in
                if since == nil { since = now }
                return since!
            }
            guard now &- since >= UInt64(ttl) + Self.reconnectGraceMs, let (map, lapsed) = try leases.failOver() else { return }
            write("relay: lease lapsed for \(lapsed.joined(separator: ", ")); shard map version \(map.version) moves their buckets to \(Set(map.hosts).subtracting(lapsed).sorted().joined(separator: ", "))")
            adoptStoredMap(from: store)
        } catch {
            leaseHealthySince.withLock { $0 = nil }
            storageFailed(error)
        }
    }
}
