/// The push relay's registrations on PostgreSQL (`PUSH_DB=postgres://…`), so several push relay
/// nodes behind one address serve the same phones: a registration made through one node is
/// delivered through any. Each `PushStore` guarantee is one statement (a renewal tests liveness in
/// its `UPDATE`), pruning both profiles one transaction. Tokens, ids and secrets are bound
/// parameters, never SQL text, and never part of an error.
public final class PostgresPushStore: PushStore {
    public let pool: PostgresPool

    /// Connects and migrates the push relay's schema (`PostgresSchema`).
    public init(pool: PostgresPool) throws(StoreError) {
        self.pool = pool
        try PostgresSchema.migrate(.push, pool: pool)
    }


    // MARK: Profile M

    /// Assigning a transaction id makes the commit write a WAL record: it fails when the server
    /// cannot write, where a read would still answer.
    public func probeAnswer() throws(StoreError) {
        _ = try pool.execute("probe_answer", "SELECT 1", [])
    }

    public func probeWrite() throws(StoreError) {
        _ = try pool.execute("probe_write", "SELECT txid_current()", [])
    }

    public func putMytty(_ registration: MyttyRegistration, pushID: String, expiresAt: UInt64) throws(StoreError) {
        try pool.execute("mytty_put", """
            INSERT INTO push_mytty_registrations (push_id, device_token, environment, relay_secret, expires_at) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (push_id) DO UPDATE SET device_token = EXCLUDED.device_token, environment = EXCLUDED.environment,
                relay_secret = EXCLUDED.relay_secret, expires_at = EXCLUDED.expires_at
            """, [pushID, registration.deviceToken, registration.environment.rawValue, registration.relaySecret, time(expiresAt)])
    }

    public func mytty(pushID: String, now: UInt64) throws(StoreError) -> MyttyRegistration? {
        guard let row = try pool.execute("mytty_read", """
            SELECT device_token, environment, relay_secret FROM push_mytty_registrations WHERE push_id = $1 AND expires_at > $2
            """, [pushID, time(now)]).first else { return nil }
        // Only this store writes the column; anything else is a damaged (or hand-edited) row,
        // which must not read as "no registration" and be silently replaced.
        guard let token = row[0], let environment = row[1].flatMap(PushEnvironment.init(rawValue:)), let secret = row[2] else {
            throw StoreError("push database: read a Profile M registration failed: unknown environment stored")
        }
        return MyttyRegistration(deviceToken: token, environment: environment, relaySecret: secret)
    }

    public func renewMytty(pushID: String, expiresAt: UInt64, now: UInt64) throws(StoreError) -> Bool {
        // Liveness is tested in the statement, so a delete or expiry that came first wins.
        try pool.execute("mytty_renew", "UPDATE push_mytty_registrations SET expires_at = $2 WHERE push_id = $1 AND expires_at > $3",
                    [pushID, time(expiresAt), time(now)]).affected > 0
    }

    public func deleteMytty(pushID: String) throws(StoreError) {
        try pool.execute("mytty_delete", "DELETE FROM push_mytty_registrations WHERE push_id = $1", [pushID])
    }

    // MARK: Profile I

    public func putITerm(_ registration: ITermRegistration, token: String, expiresAt: UInt64) throws(StoreError) {
        // registered_at is only ever read back, never compared, so its bit pattern keeps every
        // UInt64 exact in a signed column.
        try pool.execute("iterm_put", """
            INSERT INTO push_iterm_registrations (token, secret_hash, sandbox, registered_at, expires_at) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (token) DO UPDATE SET secret_hash = EXCLUDED.secret_hash, sandbox = EXCLUDED.sandbox,
                registered_at = EXCLUDED.registered_at, expires_at = EXCLUDED.expires_at
            """, [token, registration.secretHash, registration.sandbox ? "true" : "false",
                  String(Int64(bitPattern: registration.registeredAt)), time(expiresAt)])
    }

    public func iterm(token: String, now: UInt64) throws(StoreError) -> ITermRegistration? {
        guard let row = try pool.execute("iterm_read", """
            SELECT secret_hash, sandbox, registered_at FROM push_iterm_registrations WHERE token = $1 AND expires_at > $2
            """, [token, time(now)]).first else { return nil }
        return ITermRegistration(secretHash: row[0] ?? "", sandbox: row[1] == "t",
                                 registeredAt: UInt64(bitPattern: row[2].flatMap { Int64($0) } ?? 0))
    }

    public func deleteITerm(token: String) throws(StoreError) {
        try pool.execute("iterm_delete", "DELETE FROM push_iterm_registrations WHERE token = $1", [token])
    }

    // MARK: Limits every node shares

    public func hitSharedPushWindow(token: String, limit: Int, windowMs: UInt64) throws(StoreError) -> Bool? {
        // One statement on the database's clock: nodes' clocks need not agree, and two nodes
        // counting the same token at once cannot both miss the other's hit.
        let hits = try pool.execute("push_window_hit", """
            INSERT INTO push_rates (token, window_start, hits) VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, 1)
            ON CONFLICT (token) DO UPDATE SET
                window_start = CASE WHEN push_rates.window_start < EXCLUDED.window_start - $2 THEN EXCLUDED.window_start ELSE push_rates.window_start END,
                hits = CASE WHEN push_rates.window_start < EXCLUDED.window_start - $2 THEN 1 ELSE push_rates.hits + 1 END
            RETURNING hits
            """, [token, String(windowMs)]).first?[0] ?? nil
        return (hits.flatMap { Int($0) } ?? .max) <= limit
    }

    // MARK: Housekeeping

    public func pruneExpired(now: UInt64) throws(StoreError) -> Int {
        try pool.withConnection { (connection) throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                // Windows long over count nothing; a day's margin keeps any window length safe.
                try connection.execute("push_rates_prune", """
                    DELETE FROM push_rates WHERE window_start < (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 86400000
                    """)
                return try connection.execute("mytty_prune", "DELETE FROM push_mytty_registrations WHERE expires_at <= $1", [time(now)]).affected
                    + connection.execute("iterm_prune", "DELETE FROM push_iterm_registrations WHERE expires_at <= $1", [time(now)]).affected
            }
        }
    }

    public func deviceCount(now: UInt64) throws(StoreError) -> Int {
        // One statement, so both counts come from the same snapshot.
        let value = try pool.execute("push_count", """
            SELECT (SELECT count(*) FROM push_mytty_registrations WHERE expires_at > $1)
                 + (SELECT count(*) FROM push_iterm_registrations WHERE expires_at > $1)
            """, [time(now)]).first?[0] ?? nil
        return value.flatMap { Int($0) } ?? 0
    }
}

/// Times are bigint milliseconds, clamped into the signed range with order kept, so "expired at
/// `now`" means the same on both sides of the clamp.
private func time(_ milliseconds: UInt64) -> String { String(Int64(clamping: milliseconds)) }
