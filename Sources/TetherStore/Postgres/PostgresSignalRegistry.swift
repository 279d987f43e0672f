/// The signaling registry on PostgreSQL (`SIGNAL_DB=postgres://…`), on the database's clock. A
/// claim is one upsert whose update runs only when the holder's lease has lapsed (or the holder is
/// the claiming node itself, whose own stale row a restart left), so two nodes claiming one ID
/// at once have one winner.
public final class PostgresSignalRegistry: SignalRegistry {
    public let pool: PostgresPool

    public init(pool: PostgresPool) throws(StoreError) {
        self.pool = pool
        try PostgresSchema.migrate(.signal, pool: pool)
    }


    public func renewLease(node: String, forwardURL: String, ttlMs: Int64) throws(StoreError) {
        try pool.execute("signal_lease", """
            INSERT INTO signal_nodes (node, forward_url, lease_expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
            ON CONFLICT (node) DO UPDATE SET forward_url = EXCLUDED.forward_url, lease_expires_at = EXCLUDED.lease_expires_at
            """, [node, forwardURL, String(ttlMs)])
    }

    public func claim(_ id: String, node: String) throws(StoreError) -> Bool {
        try !pool.execute("signal_claim", """
            INSERT INTO signal_registrations AS r (id, node, registered_at) VALUES ($1, $2, now())
            ON CONFLICT (id) DO UPDATE SET node = EXCLUDED.node, registered_at = EXCLUDED.registered_at
            WHERE r.node = EXCLUDED.node
               OR NOT EXISTS (SELECT 1 FROM signal_nodes n WHERE n.node = r.node AND n.lease_expires_at > now())
            RETURNING node
            """, [id, node]).rows.isEmpty
    }

    public func release(_ id: String, node: String) throws(StoreError) {
        try pool.execute("signal_release", "DELETE FROM signal_registrations WHERE id = $1 AND node = $2", [id, node])
    }

    public func locate(_ id: String) throws(StoreError) -> String? {
        try pool.execute("signal_locate", """
            SELECT n.forward_url FROM signal_registrations r JOIN signal_nodes n ON n.node = r.node
            WHERE r.id = $1 AND n.lease_expires_at > now()
            """, [id]).first?[0] ?? nil
    }

    public func online(_ ids: [String]) throws(StoreError) -> Set<String> {
        // IDs are canonical (64 uppercase hex), so the array literal needs no quoting.
        let list = "{" + ids.joined(separator: ",") + "}"
        return Set(try pool.execute("signal_online", """
            SELECT r.id FROM signal_registrations r JOIN signal_nodes n ON n.node = r.node
            WHERE r.id = ANY($1::text[]) AND n.lease_expires_at > now()
            """, [list]).rows.compactMap { $0[0] })
    }

    public func forget(node: String) throws(StoreError) {
        try pool.execute("signal_forget", "DELETE FROM signal_registrations WHERE node = $1", [node])
    }
}
