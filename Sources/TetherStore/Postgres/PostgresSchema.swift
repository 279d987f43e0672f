/// The PostgreSQL schema of each Tether component, as numbered migrations. A service applies what
/// is missing when it starts (`tether db migrate` shows the same steps without applying them).
/// Versions are kept per component in `tether_schema`, so the relay and the push relay can share
/// one database or use their own. Migrations only ever add: a node of the previous build keeps
/// working against a migrated schema while a cluster is upgraded one node at a time.
public struct PostgresMigration: Sendable, Equatable {
    public let component: PostgresSchema.Component
    public let version: Int
    /// One line for operators: what the step does.
    public let summary: String
    public let sql: String
}

public enum PostgresSchema {
    public enum Component: String, Sendable, CaseIterable {
        case relay
        case push
        case signal
    }

    /// Every migration of `component`, in order.
    public static func migrations(of component: Component) -> [PostgresMigration] {
        switch component {
        case .relay: relay
        case .push: push
        case .signal: signal
        }
    }

    /// Serialises migrations across nodes that start together (an arbitrary constant: "TSCH").
    static let migrationLock = 0x5453_4348

    static let relay: [PostgresMigration] = [
        PostgresMigration(component: .relay, version: 1, summary: "room records, ephemeral secrets, assertion counters and the shard map", sql: """
            CREATE TABLE relay_rooms (
                room text PRIMARY KEY, bucket integer NOT NULL, verifier text, pairing_cycles integer NOT NULL DEFAULT 0,
                last_activity bigint, quota_day_start bigint, quota_bytes bigint);
            -- The 15 s housekeeping sweep reads this range; without the index it scans every room.
            CREATE INDEX relay_rooms_idle ON relay_rooms (last_activity) WHERE verifier IS NOT NULL;
            CREATE TABLE relay_ephemeral (
                room text NOT NULL, kind text NOT NULL, secret text NOT NULL, expires_at bigint NOT NULL,
                key_id text, public_key text, PRIMARY KEY (room, kind, secret));
            CREATE INDEX relay_ephemeral_expiry ON relay_ephemeral (expires_at);
            CREATE TABLE relay_assertion_counters (
                room text NOT NULL, key_id text NOT NULL, counter bigint NOT NULL, PRIMARY KEY (room, key_id));
            CREATE TABLE relay_shard_map (id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL, json text NOT NULL);
            """),
        PostgresMigration(component: .relay, version: 2, summary: "node leases for automatic shard failover", sql: """
            -- One row per node: its map host and when its lease lapses (the database's clock, so
            -- nodes' clocks need not agree).
            CREATE TABLE relay_nodes (host text PRIMARY KEY, lease_expires_at timestamptz NOT NULL, started_at timestamptz NOT NULL);
            """),
        PostgresMigration(component: .relay, version: 3, summary: "lease continuity and failover records (fencing by the database clock)", sql: """
            -- When a node last renewed and since when without a gap (LeaseRules): a node may act on
            -- others' leases only after a continuous run, so a database that hung never moves a live
            -- node's buckets. failed_over_at: this node's buckets went to others; it gets a share back.
            ALTER TABLE relay_nodes ADD COLUMN renewed_at timestamptz, ADD COLUMN renewed_since timestamptz,
                ADD COLUMN failed_over_at timestamptz;
            """),
    ]

    static let push: [PostgresMigration] = [
        PostgresMigration(component: .push, version: 1, summary: "Profile M and Profile I registrations", sql: """
            CREATE TABLE push_mytty_registrations (
                push_id text PRIMARY KEY, device_token text NOT NULL, environment text NOT NULL,
                relay_secret text NOT NULL, expires_at bigint NOT NULL);
            CREATE INDEX push_mytty_expiry ON push_mytty_registrations (expires_at);
            CREATE TABLE push_iterm_registrations (
                token text PRIMARY KEY, secret_hash text NOT NULL, sandbox boolean NOT NULL,
                registered_at bigint NOT NULL, expires_at bigint NOT NULL);
            CREATE INDEX push_iterm_expiry ON push_iterm_registrations (expires_at);
            """),
        PostgresMigration(component: .push, version: 2, summary: "per-token push windows every node shares", sql: """
            -- Profile I's per-token limit counted once for the cluster, not once per node.
            CREATE TABLE push_rates (token text PRIMARY KEY, window_start bigint NOT NULL, hits integer NOT NULL);
            """),
    ]

    static let signal: [PostgresMigration] = [
        PostgresMigration(component: .signal, version: 1, summary: "live registrations and node leases shared by signaling nodes", sql: """
            CREATE TABLE signal_nodes (
                node text PRIMARY KEY, forward_url text NOT NULL, lease_expires_at timestamptz NOT NULL);
            -- A live ID is registered on one node at a time; the row goes with the socket, or with
            -- its node's lease.
            CREATE TABLE signal_registrations (
                id text PRIMARY KEY, node text NOT NULL, registered_at timestamptz NOT NULL);
            CREATE INDEX signal_registrations_node ON signal_registrations (node);
            """),
    ]

    /// The migrations of `component` the database has not applied yet.
    public static func pending(_ component: Component, pool: PostgresPool) throws(StoreError) -> [PostgresMigration] {
        try pool.withConnection { (connection) throws(StoreError) in
            let applied = try appliedVersion(component, connection, creating: false)
            return migrations(of: component).filter { $0.version > applied }
        }
    }

    /// Applies what is missing, in one transaction under an advisory lock (nodes starting
    /// together migrate once); returns the steps applied. A migration may wait for another node's
    /// and may rewrite a table, so it runs under the pool's migration deadline with no statement
    /// timeout rather than a store call's 2 s.
    @discardableResult
    public static func migrate(_ component: Component, pool: PostgresPool) throws(StoreError) -> [PostgresMigration] {
        try pool.withConnection(timeoutMs: PostgresPool.migrationTimeoutMs) { (connection) throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                try connection.run("SET LOCAL statement_timeout = 0")
                try connection.execute("tether_schema_lock", "SELECT pg_advisory_xact_lock($1)", [String(migrationLock)])
                let applied = try appliedVersion(component, connection, creating: true)
                let steps = migrations(of: component).filter { $0.version > applied }
                guard let last = steps.last else { return [] }
                // A schema newer than this build knows is left alone (a newer node upgraded it).
                for step in steps { try connection.run(step.sql) }
                try connection.execute("tether_schema_set", """
                    INSERT INTO tether_schema (component, version) VALUES ($1, $2)
                    ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version
                    """, [component.rawValue, String(last.version)])
                return steps
            }
        }
    }

    private static func appliedVersion(_ component: Component, _ connection: PostgresConnection, creating: Bool) throws(StoreError) -> Int {
        if creating {
            try connection.run("CREATE TABLE IF NOT EXISTS tether_schema (component text PRIMARY KEY, version integer NOT NULL)")
        } else {
            let exists = try connection.execute("tether_schema_exists", "SELECT to_regclass('tether_schema') IS NOT NULL")
            guard exists.first?[0] == "t" else { return 0 }
        }
        let row = try connection.execute("tether_schema_get", "SELECT version FROM tether_schema WHERE component = $1", [component.rawValue])
        guard let text = row.first?[0] ?? nil, let version = Int(text) else { return 0 }
        return version
    }
}
