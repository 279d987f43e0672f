public import TetherWire

extension PostgresRoomStore: NodeLeases {
    /// One lease round at a time across the cluster (an arbitrary constant: "TRLY").
    static let failoverLock = 0x5452_4C59

    @discardableResult
    public func renewLease(host: String, rules: LeaseRules) throws(StoreError) -> [String] {
        // `renewed_since` starts a new continuous run when the previous renewal is older than the
        // continuity gap (or the row predates the column); a lease that lapsed always has. The
        // live hosts come in the same round trip (the outer query's snapshot predates the upsert,
        // so this host is added from its RETURNING).
        let rows = try pool.execute("lease_renew", """
            WITH r AS (
                INSERT INTO relay_nodes (host, lease_expires_at, started_at, renewed_at, renewed_since)
                VALUES ($1, now() + $2 * interval '1 millisecond', now(), now(), now())
                ON CONFLICT (host) DO UPDATE SET lease_expires_at = EXCLUDED.lease_expires_at, renewed_at = now(),
                    renewed_since = CASE WHEN relay_nodes.renewed_at > now() - $3 * interval '1 millisecond'
                                         THEN coalesce(relay_nodes.renewed_since, now()) ELSE now() END
                RETURNING host)
            SELECT host FROM relay_nodes WHERE lease_expires_at > now() UNION SELECT host FROM r
            """, [host, String(rules.ttlMs), String(rules.continuityMs)]).rows
        return rows.compactMap { $0[0] }.sorted()
    }

    public func liveHosts() throws(StoreError) -> [String] {
        try pool.execute("lease_live", "SELECT host FROM relay_nodes WHERE lease_expires_at > now() ORDER BY host", []).rows.compactMap { $0[0] }
    }

    public func leaseRound(host: String, rules: LeaseRules) throws(StoreError) -> LeaseRound? {
        try pool.withConnection { (connection) throws(StoreError) -> LeaseRound? in
            try connection.transaction { () throws(StoreError) -> LeaseRound? in
                // Elected for this round only while the transaction lasts; a node that loses the
                // race simply tries again at its next renewal.
                guard try connection.execute("failover_lock", "SELECT pg_try_advisory_xact_lock($1)", [String(Self.failoverLock)]).first?[0] == "t",
                      let json = try connection.execute("failover_map", "SELECT json FROM relay_shard_map WHERE id = 1 FOR UPDATE").first?[0] ?? nil,
                      let map = try? ShardMap(json: Array(json.utf8)) else { return nil }
                // Per node: live now; dead by `LeaseRules` as this node sees it; owed a share
                // back. No row for this node with a live, continuous lease: no round at all.
                let rows = try connection.execute("failover_nodes", """
                    WITH me AS (SELECT renewed_since FROM relay_nodes
                                WHERE host = $1 AND lease_expires_at > now() AND renewed_at > now() - $2 * interval '1 millisecond')
                    SELECT n.host, n.lease_expires_at > now(),
                           n.lease_expires_at <= now() AND (me.renewed_since <= n.renewed_at OR me.renewed_since <= now() - $3 * interval '1 millisecond'),
                           n.lease_expires_at > now() AND n.renewed_since <= now() - $4 * interval '1 millisecond',
                           n.failed_over_at IS NOT NULL
                    FROM relay_nodes n, me
                    """, [host, String(rules.continuityMs), String(rules.settledMs), String(rules.restoreAfterMs)]).rows
                let mapped = Set(map.hosts)
                var live: [String] = [], dead: Set<String> = [], owed: Set<String> = []
                for row in rows {
                    guard let node = row[0] else { continue }
                    if row[1] == "t" { live.append(node) }
                    if row[2] == "t" { dead.insert(node) }
                    // Settled, and either failed over or (when the rules place new nodes) unmapped.
                    if row[3] == "t", row[4] == "t" || (rules.placesNewNodes && !mapped.contains(node)) { owed.insert(node) }
                }
                // Only a host that held a lease and let it lapse is dead: one that never started
                // is the operator's to place. Heirs are the live nodes that serve buckets now (a
                // node that came back joins with none), or every live node if none does.
                let serving = live.filter { mapped.contains($0) }
                let round: LeaseRound
                let lapsed = dead.intersection(mapped)
                if !lapsed.isEmpty, let next = ShardPlan.failover(map, dead: lapsed, survivors: serving.isEmpty ? live : serving) {
                    round = LeaseRound(map: next, change: .failover(lapsed: lapsed.sorted()))
                    try connection.execute("failover_mark", "UPDATE relay_nodes SET failed_over_at = now() WHERE host = ANY($1::text[])",
                                           [Self.textArray(lapsed)])
                } else if lapsed.isEmpty, !owed.isEmpty, let next = ShardPlan.restore(map, returning: owed) {
                    round = LeaseRound(map: next, change: .restored(owed.sorted()))
                    try connection.execute("restore_mark", "UPDATE relay_nodes SET failed_over_at = NULL WHERE host = ANY($1::text[])",
                                           [Self.textArray(owed)])
                } else {
                    return nil
                }
                try connection.execute("failover_publish", """
                    UPDATE relay_shard_map SET version = $1, json = $2 WHERE id = 1 AND version < $1
                    """, [String(round.map.version), round.map.json])
                try connection.execute("failover_notify", "SELECT pg_notify($1, $2)", [Self.mapChannel, String(round.map.version)])
                return round
            }
        }
    }

    /// Where a published map is announced (`NOTIFY`, delivered at the commit).
    static let mapChannel = "tether_shard_map"

    public func watchShardMap(_ changed: @escaping @Sendable () -> Void) -> ShardMapWatch {
        let listener = PostgresListener(url: pool.settings.url, channel: Self.mapChannel, changed: changed)
        return ShardMapWatch { listener.stop() }
    }

    /// A PostgreSQL array literal of hosts (map hosts: letters, digits, dots, hyphens, a port).
    private static func textArray(_ hosts: Set<String>) -> String {
        "{" + hosts.sorted().map { "\"\($0)\"" }.joined(separator: ",") + "}"
    }
}
