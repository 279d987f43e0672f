public import TetherWire

extension PostgresRoomStore: NodeLeases {
    /// One failover round at a time across the cluster (an arbitrary constant: "TRLY").
    static let failoverLock = 0x5452_4C59

    public func renewLease(host: String, ttlMs: Int64) throws(StoreError) {
        try pool.execute("lease_renew", """
            INSERT INTO relay_nodes (host, lease_expires_at, started_at) VALUES ($1, now() + $2 * interval '1 millisecond', now())
            ON CONFLICT (host) DO UPDATE SET lease_expires_at = EXCLUDED.lease_expires_at
            """, [host, String(ttlMs)])
    }

    public func liveHosts() throws(StoreError) -> [String] {
        try pool.execute("lease_live", "SELECT host FROM relay_nodes WHERE lease_expires_at > now() ORDER BY host", []).rows.compactMap { $0[0] }
    }

    public func failOver() throws(StoreError) -> (map: ShardMap, lapsed: [String])? {
        try pool.withConnection { (connection) throws(StoreError) -> (map: ShardMap, lapsed: [String])? in
            try connection.transaction { () throws(StoreError) -> (map: ShardMap, lapsed: [String])? in
                // Elected for this round only while the transaction lasts; a node that loses the
                // race simply tries again at its next renewal.
                guard try connection.execute("failover_lock", "SELECT pg_try_advisory_xact_lock($1)", [String(Self.failoverLock)]).first?[0] == "t",
                      let json = try connection.execute("failover_map", "SELECT json FROM relay_shard_map WHERE id = 1 FOR UPDATE").first?[0] ?? nil,
                      let map = try? ShardMap(json: Array(json.utf8)) else { return nil }
                var live: [String] = [], lapsed: Set<String> = []
                for row in try connection.execute("failover_nodes", "SELECT host, lease_expires_at > now() FROM relay_nodes").rows {
                    guard let host = row[0] else { continue }
                    if row[1] == "t" { live.append(host) } else { lapsed.insert(host) }
                }
                // Only a host that held a lease and let it lapse is dead: one that never started
                // is the operator's to place. Heirs are the live nodes that serve buckets now (a
                // node that came back joins with none), or every live node if none does.
                let mapped = Set(map.hosts)
                let dead = lapsed.intersection(mapped)
                let serving = live.filter { mapped.contains($0) }
                guard !dead.isEmpty, let next = ShardPlan.failover(map, dead: dead, survivors: serving.isEmpty ? live : serving) else { return nil }
                try connection.execute("failover_publish", """
                    UPDATE relay_shard_map SET version = $1, json = $2 WHERE id = 1 AND version < $1
                    """, [String(next.version), next.json])
                return (next, dead.sorted())
            }
        }
    }
}
