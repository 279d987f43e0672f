import CSQLite
import TetherSync

/// The push relay's embedded store (`PUSH_DB`, default `push.db`): a SQLite file of its own, never
/// the room relay's, since the push relay is a separate process (push.md §1). WAL mode with
/// `synchronous=NORMAL`: a write that returned survives a crash of the process. One connection,
/// serialised by a lock, shared by every store lane.
///
/// Each guarantee of `PushStore` is one statement (a renewal tests liveness in its `UPDATE`) or,
/// for pruning both tables, one transaction, so other processes on the same file cannot break it
/// either. Every SQLite failure is thrown as a
/// `StoreError` whose message is SQLite's generic text for the result code — never a bound
/// value, so never a token, id or secret.
public final class SQLitePushStore: PushStore, Sendable {
    /// Why the database could not be opened; the relay refuses to start with it.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// SQLite could not open or read the file (missing directory, not a database, I/O error).
        case open(String)
        /// The file is a database, but not one this build may use as the push store.
        case schema(String)

        public var description: String {
            switch self {
            case let .open(message): "cannot open the push database: \(message)"
            case let .schema(message): "refusing the push database: \(message)"
            }
        }
    }

    /// Stamped into the file (`PRAGMA application_id`, "TPSH") so that `PUSH_DB` pointed at some
    /// other database — the room relay's, say — is refused instead of written into.
    static let applicationID: Int32 = 0x5450_5348
    /// `PRAGMA user_version` of the schema below. A later build that changes it migrates on open.
    static let schemaVersion: Int32 = 1

    private let connection: Locked<Connection>

    /// Opens (creating if needed) the database at `path`; `:memory:` keeps it in memory. A writer
    /// held up by another process waits `busyTimeoutMilliseconds` before its call throws.
    public init(path: String, busyTimeoutMilliseconds: Int32 = 5_000) throws(Failure) {
        let connection = try Connection(path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        self.connection = Locked(connection)
    }

    // MARK: Profile M

    public func putMytty(_ registration: MyttyRegistration, pushID: String, expiresAt: UInt64) throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) -> Void in
            try db.run("store a Profile M registration", """
                INSERT INTO mytty_registrations (push_id, device_token, environment, relay_secret, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
                ON CONFLICT(push_id) DO UPDATE SET device_token = ?2, environment = ?3, relay_secret = ?4, expires_at = ?5
                """, [.text(pushID), .text(registration.deviceToken), .text(registration.environment.rawValue),
                      .text(registration.relaySecret), .time(expiresAt)])
        }
    }

    public func mytty(pushID: String, now: UInt64) throws(StoreError) -> MyttyRegistration? {
        try connection.withLock { (db) throws(StoreError) -> MyttyRegistration? in
            let row = try db.firstRow("read a Profile M registration",
                                      "SELECT device_token, environment, relay_secret FROM mytty_registrations WHERE push_id = ?1 AND expires_at > ?2",
                                      [.text(pushID), .time(now)]) { row in [row.text(0), row.text(1), row.text(2)] }
            guard let row else { return nil }
            // Only this store writes the column; anything else is a damaged (or hand-edited) file,
            // which must not read as "no registration" and be silently replaced.
            guard let environment = PushEnvironment(rawValue: row[1]) else {
                throw StoreError("push database: read a Profile M registration failed: unknown environment stored")
            }
            return MyttyRegistration(deviceToken: row[0], environment: environment, relaySecret: row[2])
        }
    }

    @discardableResult
    public func renewMytty(pushID: String, expiresAt: UInt64, now: UInt64) throws(StoreError) -> Bool {
        try connection.withLock { (db) throws(StoreError) -> Bool in
            // Liveness is tested in the statement, so a delete or expiry that came first wins.
            try db.run("renew a Profile M registration",
                       "UPDATE mytty_registrations SET expires_at = ?2 WHERE push_id = ?1 AND expires_at > ?3",
                       [.text(pushID), .time(expiresAt), .time(now)]) > 0
        }
    }

    public func deleteMytty(pushID: String) throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) -> Void in
            try db.run("delete a Profile M registration", "DELETE FROM mytty_registrations WHERE push_id = ?1", [.text(pushID)])
        }
    }

    // MARK: Profile I

    public func putITerm(_ registration: ITermRegistration, token: String, expiresAt: UInt64) throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) -> Void in
            try db.run("store a Profile I registration", """
                INSERT INTO iterm_registrations (token, secret_hash, sandbox, registered_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
                ON CONFLICT(token) DO UPDATE SET secret_hash = ?2, sandbox = ?3, registered_at = ?4, expires_at = ?5
                """, [.text(token), .text(registration.secretHash), .integer(registration.sandbox ? 1 : 0),
                      .integer(Int64(bitPattern: registration.registeredAt)), .time(expiresAt)])
        }
    }

    public func iterm(token: String, now: UInt64) throws(StoreError) -> ITermRegistration? {
        try connection.withLock { (db) throws(StoreError) -> ITermRegistration? in
            try db.firstRow("read a Profile I registration",
                            "SELECT secret_hash, sandbox, registered_at FROM iterm_registrations WHERE token = ?1 AND expires_at > ?2",
                            [.text(token), .time(now)]) { row in
                // registered_at is only ever read back, never compared, so its bit pattern keeps
                // every UInt64 exact.
                ITermRegistration(secretHash: row.text(0), sandbox: row.integer(1) != 0, registeredAt: UInt64(bitPattern: row.integer(2)))
            }
        }
    }

    public func deleteITerm(token: String) throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) -> Void in
            try db.run("delete a Profile I registration", "DELETE FROM iterm_registrations WHERE token = ?1", [.text(token)])
        }
    }

    // MARK: Housekeeping

    public func probeWrite() throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) in try db.probeWrite() }
    }

    public func pruneExpired(now: UInt64) throws(StoreError) -> Int {
        try connection.withLock { (db) throws(StoreError) -> Int in
            try db.transaction("prune expired registrations") { () throws(StoreError) -> Int in
                try db.run("prune expired registrations", "DELETE FROM mytty_registrations WHERE expires_at <= ?1", [.time(now)])
                    + db.run("prune expired registrations", "DELETE FROM iterm_registrations WHERE expires_at <= ?1", [.time(now)])
            }
        }
    }

    public func deviceCount(now: UInt64) throws(StoreError) -> Int {
        try connection.withLock { (db) throws(StoreError) -> Int in
            // One statement, so both counts come from the same snapshot.
            try db.firstRow("count registrations", """
                SELECT (SELECT count(*) FROM mytty_registrations WHERE expires_at > ?1)
                     + (SELECT count(*) FROM iterm_registrations WHERE expires_at > ?1)
                """, [.time(now)]) { Int($0.integer(0)) } ?? 0
        }
    }

    // MARK: Test support

    /// Caps the file at the pages it has now, so the next write needing a page fails as on a
    /// full disk (`SQLITE_FULL`). Tests only; the cap lasts until the store is closed.
    func capSizeAtCurrentPages() throws(StoreError) {
        try connection.withLock { (db) throws(StoreError) -> Void in
            let pages = try db.firstRow("read the page count", "PRAGMA page_count", []) { $0.integer(0) } ?? 0
            try db.execute("cap the page count", "PRAGMA max_page_count = \(pages)")
        }
    }
}

// MARK: - The connection

/// What a statement binds. Times are clamped into SQLite's signed 64 bits; order is kept, so
/// "expired at `now`" means the same on both sides of the clamp.
private enum Value {
    case text(String)
    case integer(Int64)

    static func time(_ milliseconds: UInt64) -> Value { .integer(Int64(clamping: milliseconds)) }
}

/// The current row of a stepped statement.
private struct Row {
    let statement: OpaquePointer

    /// NOT NULL columns only: a text column never reads as nil. Read by length, so it comes back
    /// byte for byte as it was bound.
    func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column))), as: UTF8.self)
    }

    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
}

/// The one SQLite connection and its prepared statements. Not Sendable: it lives inside the
/// store's lock, so only the lock holder ever touches it.
private final class Connection {
    private let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, busyTimeoutMilliseconds: Int32) throws(SQLitePushStore.Failure) {
        var handle: OpaquePointer?
        DatabaseFile.createOwnerOnly(path)
        let status = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw .open(message)
        }
        db = handle
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
        // The first statements read the file: a file that is not a database fails here.
        try opening { () throws(StoreError) in
            try execute("configure the connection", """
                PRAGMA journal_mode=WAL;
                PRAGMA synchronous=NORMAL;
                -- A deleted registration (a device token, a relay secret) is zeroed, not left in a free page.
                PRAGMA secure_delete=ON;
                """)
        }
        try createOrCheckSchema()
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
    }

    /// A fresh file gets the schema and the push store's stamp; one stamped by this store is
    /// checked for a version this build knows; anything else is refused untouched.
    private func createOrCheckSchema() throws(SQLitePushStore.Failure) {
        try opening { () throws(StoreError) in try execute("lock the database", "BEGIN IMMEDIATE") }
        do throws(SQLitePushStore.Failure) {
            let (applicationID, version, objects) = try opening { () throws(StoreError) in
                (try pragma("application_id"), try pragma("user_version"),
                 try firstRow("read the schema", "SELECT count(*) FROM sqlite_master", []) { $0.integer(0) } ?? 0)
            }
            switch (applicationID, version) {
            case (0, 0) where objects == 0:
                // Only what push.md §6 lets the relay keep: no IPs, no macID, no ciphertext.
                try opening { () throws(StoreError) in
                    try execute("create the schema", """
                        CREATE TABLE mytty_registrations (
                            push_id TEXT PRIMARY KEY NOT NULL, device_token TEXT NOT NULL, environment TEXT NOT NULL,
                            relay_secret TEXT NOT NULL, expires_at INTEGER NOT NULL);
                        CREATE TABLE iterm_registrations (
                            token TEXT PRIMARY KEY NOT NULL, secret_hash TEXT NOT NULL, sandbox INTEGER NOT NULL,
                            registered_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);
                        -- Housekeeping and the device gauge read expiry ranges; without these they scan every row.
                        CREATE INDEX mytty_registrations_expiry ON mytty_registrations (expires_at);
                        CREATE INDEX iterm_registrations_expiry ON iterm_registrations (expires_at);
                        PRAGMA application_id = \(SQLitePushStore.applicationID);
                        PRAGMA user_version = \(SQLitePushStore.schemaVersion);
                        """)
                }
            case (Int64(SQLitePushStore.applicationID), Int64(SQLitePushStore.schemaVersion)):
                break
            case (Int64(SQLitePushStore.applicationID), _):
                throw .schema("schema version \(version) is not one this build knows (it writes \(SQLitePushStore.schemaVersion))")
            default:
                throw .schema("the file is a database, but not a push registration store")
            }
            try opening { () throws(StoreError) in try execute("commit the schema", "COMMIT") }
        } catch {
            _ = try? execute("roll back", "ROLLBACK")
            throw error
        }
    }

    /// Runs a step of opening; a failure carries SQLite's own message, which is more telling than
    /// the result code alone and holds no registration while nothing is bound.
    private func opening<R>(_ body: () throws(StoreError) -> R) throws(SQLitePushStore.Failure) -> R {
        do {
            return try body()
        } catch {
            throw .open(String(cString: sqlite3_errmsg(db)))
        }
    }

    private func pragma(_ name: String) throws(StoreError) -> Int64 {
        try firstRow("read the schema", "PRAGMA \(name)", []) { $0.integer(0) } ?? 0
    }

    /// Creating and dropping a table dirties the schema page, so the commit appends to the WAL as
    /// any write does, and fails as any write would on a full disk.
    func probeWrite() throws(StoreError) {
        try transaction("probe") { () throws(StoreError) in
            try execute("probe", "CREATE TABLE write_probe (x); DROP TABLE write_probe")
        }
    }

    // MARK: Statements

    /// Runs SQL text without bindings (schema, pragmas, transaction control).
    func execute(_ operation: String, _ sql: String) throws(StoreError) {
        let status = sqlite3_exec(db, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw failure(operation, status) }
    }

    /// Runs `body` inside one write transaction: all of it commits or none of it does.
    func transaction<R>(_ operation: String, _ body: () throws(StoreError) -> R) throws(StoreError) -> R {
        try execute(operation, "BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute(operation, "COMMIT")
            return result
        } catch {
            _ = try? execute(operation, "ROLLBACK")
            throw error
        }
    }

    /// Runs a statement to completion; returns the rows it changed.
    @discardableResult
    func run(_ operation: String, _ sql: String, _ values: [Value]) throws(StoreError) -> Int {
        _ = try firstRow(operation, sql, values) { _ in () }
        return Int(sqlite3_changes(db))
    }

    /// Runs a statement to completion; returns its first row as `read` sees it, nil if it had none.
    /// Stepping to the end is what reports a failure that comes after the first row, and commits.
    func firstRow<R>(_ operation: String, _ sql: String, _ values: [Value], _ read: (Row) -> R) throws(StoreError) -> R? {
        let statement = try prepared(operation, sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let status = switch value {
            case let .text(text): sqlite3_bind_text(statement, index, text, Int32(text.utf8.count), tether_sqlite_transient())
            case let .integer(integer): sqlite3_bind_int64(statement, index, integer)
            }
            guard status == SQLITE_OK else { throw failure(operation, status) }
        }
        var first: R?
        var sawRow = false
        while true {
            let status = sqlite3_step(statement)
            switch status {
            case SQLITE_ROW where !sawRow:
                first = read(Row(statement: statement))
                sawRow = true
            case SQLITE_ROW:
                continue
            case SQLITE_DONE:
                return first
            default:
                throw failure(operation, status)
            }
        }
    }

    private func prepared(_ operation: String, _ sql: String) throws(StoreError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw failure(operation, status)
        }
        statements[sql] = statement
        return statement
    }

    /// SQLite's fixed text for the result code, never `sqlite3_errmsg`: the latter can quote the
    /// statement, and a thrown message must carry no token, id or secret.
    private func failure(_ operation: String, _ status: Int32) -> StoreError {
        let code = sqlite3_extended_errcode(db)
        let reason = String(cString: sqlite3_errstr(status))
        return StoreError("push database: \(operation) failed: \(reason) (SQLite \(code == 0 ? status : code))")
    }
}
