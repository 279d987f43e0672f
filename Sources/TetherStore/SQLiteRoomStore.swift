import CSQLite
import Foundation
public import TetherWire

/// The embedded store: one SQLite file in WAL mode. Ordinary writes commit with
/// `synchronous=NORMAL` (survive a process crash, `kill -9` included); a verifier — the one
/// record whose loss strands a pairing — commits with `synchronous=FULL` so it also survives an
/// OS crash. One connection, serialised by a lock, shared by every store lane.
public final class SQLiteRoomStore: RoomStore, @unchecked Sendable {   // the connection and statement cache are used only under `lock`
    public enum Failure: Error, CustomStringConvertible {
        case open(String)
        public var description: String {
            switch self {
            case let .open(message): "cannot open the room database: \(message)"
            }
        }
    }

    private let db: OpaquePointer
    private let lock = NSLock()
    private var statements: [String: OpaquePointer] = [:]

    public init(path: String) throws {
        var handle: OpaquePointer?
        DatabaseFile.createOwnerOnly(path)
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw Failure.open(message)
        }
        db = handle
        sqlite3_busy_timeout(db, 5_000)
        try execute("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=NORMAL;
            -- Deleted rows (spent tickets, tokens, reaped rooms) are zeroed, not left in free pages.
            PRAGMA secure_delete=ON;
            CREATE TABLE IF NOT EXISTS rooms (
                room TEXT PRIMARY KEY, verifier TEXT, pairing_cycles INTEGER NOT NULL DEFAULT 0,
                last_activity INTEGER, quota_day_start INTEGER, quota_bytes INTEGER, bucket INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS ephemeral (
                room TEXT NOT NULL, kind TEXT NOT NULL, secret TEXT NOT NULL, expires_at INTEGER NOT NULL,
                key_id TEXT, public_key TEXT, PRIMARY KEY (room, kind, secret));
            -- Per room (§6.2 assertcounter:<keyId>), so a torn-down room leaves none behind. The
            -- global table of earlier builds never held a counter: /attest refused everything then.
            DROP TABLE IF EXISTS assertion_counters;
            CREATE TABLE IF NOT EXISTS room_assertion_counters (
                room TEXT NOT NULL, key_id TEXT NOT NULL, counter INTEGER NOT NULL, PRIMARY KEY (room, key_id));
            CREATE TABLE IF NOT EXISTS shard_map (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, json TEXT NOT NULL);
            -- The 15 s housekeeping sweep reads these ranges; without the indexes it scans every room.
            CREATE INDEX IF NOT EXISTS rooms_idle ON rooms (last_activity) WHERE verifier IS NOT NULL;
            CREATE INDEX IF NOT EXISTS ephemeral_expiry ON ephemeral (expires_at);
            """)
        try migrateToRoomKeys()
    }

    /// Schema 1 keys every row by `RoomKey`, never by the room name. A database written before it
    /// (user_version 0, names in the `room` columns) is rewritten in one transaction on open, so
    /// nothing stored is lost and no name stays behind. Fresh databases have no rows to rewrite.
    private func migrateToRoomKeys() throws(StoreError) {
        let version = try query("PRAGMA user_version", []) { sqlite3_column_int64($0, 0) } ?? 0
        guard version < 1 else { return }
        let hasBucket = try queryAll("PRAGMA table_info(rooms)", []) { text($0, 1) }.contains("bucket")
        try locked { () throws(StoreError) in
            try executeLocked("BEGIN IMMEDIATE")
            do throws(StoreError) {
                if !hasBucket { try executeLocked("ALTER TABLE rooms ADD COLUMN bucket INTEGER NOT NULL DEFAULT 0") }
                for (table, hasBucketColumn) in [("rooms", true), ("ephemeral", false)] {
                    for name in try queryAllLocked("SELECT DISTINCT room FROM \(table)", [], { text($0, 0) }).compactMap({ $0 }) {
                        guard let room = RoomName(header: name) else { continue }
                        let key = RoomKey(room)
                        if hasBucketColumn {
                            try runLocked("UPDATE rooms SET room = ?1, bucket = ?2 WHERE room = ?3", [key.hex, key.bucket, name])
                        } else {
                            try runLocked("UPDATE \(table) SET room = ?1 WHERE room = ?2", [key.hex, name])
                        }
                    }
                }
                try executeLocked("PRAGMA user_version = 1")
                try executeLocked("COMMIT")
                // The old pages' images, names included, must not linger in the log either.
                _ = try? executeLocked("PRAGMA wal_checkpoint(TRUNCATE)")
            } catch {
                _ = try? executeLocked("ROLLBACK")
                throw error
            }
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    // MARK: RoomStore

    public func verifier(of room: RoomKey) throws(StoreError) -> String? {
        try query("SELECT verifier FROM rooms WHERE room = ?1", [room.hex]) { text($0, 0) } ?? nil
    }

    public func admissionState(of room: RoomKey) throws(StoreError) -> AdmissionState {
        try query("SELECT verifier, pairing_cycles FROM rooms WHERE room = ?1", [room.hex]) {
            AdmissionState(verifier: text($0, 0), pairingCycles: Int(sqlite3_column_int64($0, 1)))
        } ?? AdmissionState(verifier: nil, pairingCycles: 0)
    }

    public func admission(_ query: AdmissionQuery, of room: RoomKey) throws(StoreError) -> AdmissionRead {
        // One statement for the room row (verifier, cycles, quota); the ticket only when needed.
        let row = try self.query("SELECT verifier, pairing_cycles, quota_day_start, quota_bytes, last_activity FROM rooms WHERE room = ?1", [room.hex]) { row in
            AdmissionRead(state: AdmissionState(verifier: text(row, 0), pairingCycles: Int(sqlite3_column_int64(row, 1))),
                          quota: sqlite3_column_type(row, 2) == SQLITE_NULL ? nil
                              : QuotaRecord(dayStart: UInt64(sqlite3_column_int64(row, 2)), bytes: sqlite3_column_int64(row, 3)),
                          lastActivity: sqlite3_column_type(row, 0) == SQLITE_NULL || sqlite3_column_type(row, 4) == SQLITE_NULL ? nil
                              : UInt64(sqlite3_column_int64(row, 4)))
        }
        var read = row ?? AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0))
        if read.state.verifier == nil, let ticket = query.ticket {
            read.ticket = try consumeTicket(ticket, in: room, now: query.now)
        }
        return read
    }

    public func pairingCycles(of room: RoomKey) throws(StoreError) -> Int {
        try query("SELECT pairing_cycles FROM rooms WHERE room = ?1", [room.hex]) { Int(sqlite3_column_int64($0, 0)) } ?? 0
    }

    public func setPairingCycles(_ cycles: Int, of room: RoomKey) throws(StoreError) {
        let key = room
        guard cycles > 0 else {
            // The common case — a fresh room's first mac park — finds no row and writes nothing.
            try locked { () throws(StoreError) in
                guard try runLocked("UPDATE rooms SET pairing_cycles = 0 WHERE room = ?1 AND pairing_cycles != 0", [key.hex]) > 0 else { return }
                try runLocked("DELETE FROM rooms WHERE room = ?1 AND \(Self.holdsNothing)", [key.hex])
            }
            return
        }
        try run("INSERT INTO rooms (room, bucket, pairing_cycles) VALUES (?1, ?3, ?2) ON CONFLICT(room) DO UPDATE SET pairing_cycles = ?2", [key.hex, cycles, key.bucket])
    }

    public func touch(_ room: RoomKey, at now: UInt64) throws(StoreError) {
        try run("UPDATE rooms SET last_activity = ?2 WHERE room = ?1 AND verifier IS NOT NULL", [room.hex, Int(clamping: now)])
    }

    public func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) throws(StoreError) -> TicketRecord? {
        let record: TicketRecord?? = try query("DELETE FROM ephemeral WHERE room = ?1 AND kind = 'ticket' AND secret = ?2 RETURNING expires_at, key_id, public_key",
                                           [room.hex, ticket]) { row in
            TicketRecord(expiresAt: UInt64(sqlite3_column_int64(row, 0)), keyID: text(row, 1) ?? "", publicKey: text(row, 2) ?? "")
        }
        guard let found = record ?? nil, found.expiresAt >= now else { return nil }
        return found
    }

    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "regtoken", token, record.expiresAt, record.attestKeyID, record.attestPublicKey)
    }

    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "challenge", challenge, expiresAt, nil, nil)
    }

    public func liveChallenges(in room: RoomKey, now: UInt64) throws(StoreError) -> Int {
        try run("DELETE FROM ephemeral WHERE room = ?1 AND kind = 'challenge' AND expires_at < ?2", [room.hex, Int(now)])
        return try query("SELECT count(*) FROM ephemeral WHERE room = ?1 AND kind = 'challenge'", [room.hex]) { Int(sqlite3_column_int64($0, 0)) } ?? 0
    }

    public func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        let expiresAt = try query("DELETE FROM ephemeral WHERE room = ?1 AND kind = 'challenge' AND secret = ?2 RETURNING expires_at",
                              [room.hex, challenge]) { UInt64(sqlite3_column_int64($0, 0)) }
        return expiresAt.map { $0 >= now } ?? false
    }

    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "ticket", ticket, record.expiresAt, record.keyID, record.publicKey)
    }

    public func registrationToken(_ token: String, in room: RoomKey, now: UInt64) throws(StoreError) -> RegistrationTokenRecord? {
        let record = try query("SELECT expires_at, key_id, public_key FROM ephemeral WHERE room = ?1 AND kind = 'regtoken' AND secret = ?2",
                           [room.hex, token]) { row in
            RegistrationTokenRecord(expiresAt: UInt64(sqlite3_column_int64(row, 0)), attestKeyID: text(row, 1), attestPublicKey: text(row, 2))
        }
        guard let record, record.expiresAt >= now else { return nil }
        return record
    }

    public func deleteRegistrationToken(_ token: String, in room: RoomKey) throws(StoreError) {
        try run("DELETE FROM ephemeral WHERE room = ?1 AND kind = 'regtoken' AND secret = ?2", [room.hex, token])
    }

    public func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        let key = room
        return try locked { () throws(StoreError) -> Bool in
            _ = try? executeLocked("PRAGMA synchronous=FULL")
            defer { _ = try? executeLocked("PRAGMA synchronous=NORMAL") }
            // The test is in the statement: a verifier already stored is never overwritten.
            return try runLocked("""
                INSERT INTO rooms (room, bucket, verifier, last_activity) VALUES (?1, ?4, ?2, ?3)
                ON CONFLICT(room) DO UPDATE SET verifier = ?2, last_activity = ?3, pairing_cycles = 0 WHERE rooms.verifier IS NULL
                """, [key.hex, verifier, Int(clamping: now), key.bucket]) > 0
        }
    }

    public func assertionCounter(for keyID: String, in room: RoomKey) throws(StoreError) -> UInt32? {
        try query("SELECT counter FROM room_assertion_counters WHERE room = ?1 AND key_id = ?2", [room.hex, keyID]) {
            UInt32(truncatingIfNeeded: sqlite3_column_int64($0, 0))
        }
    }

    public func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) throws(StoreError) {
        // Durable like the verifier it guards: a lost counter would let an assertion replay.
        try run("INSERT INTO room_assertion_counters (room, key_id, counter) VALUES (?1, ?2, ?3) ON CONFLICT(room, key_id) DO UPDATE SET counter = ?3",
            [room.hex, keyID, Int(counter)])
    }

    public func quota(of room: RoomKey) throws(StoreError) -> QuotaRecord? {
        try query("SELECT quota_day_start, quota_bytes FROM rooms WHERE room = ?1 AND quota_day_start IS NOT NULL", [room.hex]) { row in
            QuotaRecord(dayStart: UInt64(sqlite3_column_int64(row, 0)), bytes: sqlite3_column_int64(row, 1))
        }
    }

    public func setQuota(_ record: QuotaRecord, of room: RoomKey) throws(StoreError) {
        let key = room
        try run("INSERT INTO rooms (room, bucket, quota_day_start, quota_bytes) VALUES (?1, ?4, ?2, ?3) ON CONFLICT(room) DO UPDATE SET quota_day_start = ?2, quota_bytes = ?3",
            [key.hex, Int(record.dayStart), Int(record.bytes), key.bucket])
    }

    public func deleteRoom(_ key: RoomKey) throws(StoreError) {
        try locked { () throws(StoreError) in
            // All or nothing: a teardown that fails half-way leaves the room as it was.
            do throws(StoreError) {
                try executeLocked("BEGIN")
                try runLocked("DELETE FROM ephemeral WHERE room = ?1", [key.hex])
                try runLocked("DELETE FROM room_assertion_counters WHERE room = ?1", [key.hex])
                try runLocked("DELETE FROM rooms WHERE room = ?1", [key.hex])
                try executeLocked("COMMIT")
            } catch {
                _ = try? executeLocked("ROLLBACK")
                throw error
            }
        }
    }

    public func pruneExpired(now: UInt64) throws(StoreError) {
        try run("DELETE FROM ephemeral WHERE expires_at < ?1", [Int(clamping: now)])
        try run("UPDATE rooms SET last_activity = ?1 WHERE verifier IS NOT NULL AND last_activity IS NULL", [Int(clamping: now)])
        if now >= QuotaRecord.window {
            try run("UPDATE rooms SET quota_day_start = NULL, quota_bytes = NULL WHERE quota_day_start IS NOT NULL AND quota_day_start <= ?1",
                [Int(clamping: now - QuotaRecord.window)])
        }
        try run("DELETE FROM rooms WHERE \(Self.holdsNothing)", [])
    }

    public func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) throws(StoreError) -> [RoomKey] {
        try queryAll("SELECT room, bucket FROM rooms WHERE verifier IS NOT NULL AND last_activity < ?1 LIMIT ?2", [Int(clamping: cutoff), limit]) { row in
            text(row, 0).flatMap { RoomKey(hex: $0, bucket: Int(sqlite3_column_int64(row, 1))) }
        }.compactMap { $0 }
    }

    public func lastActivity(of key: RoomKey) throws(StoreError) -> UInt64? {
        try query("SELECT last_activity FROM rooms WHERE room = ?1 AND verifier IS NOT NULL AND last_activity IS NOT NULL", [key.hex]) {
            UInt64(sqlite3_column_int64($0, 0))
        }
    }

    public func shardMap() throws(StoreError) -> ShardMap? {
        // A row that no longer parses (edited by hand) reads as absent rather than as a map
        // clients would refuse; the node then owns everything until a valid map is published.
        try query("SELECT json FROM shard_map WHERE id = 1", []) { text($0, 0) }?.flatMap { try? ShardMap(json: Array($0.utf8)) }
    }

    public func publishShardMap(_ map: ShardMap) throws(StoreError) -> Bool {
        // The version test is inside the statement, so two nodes publishing at once cannot lower it.
        try query("INSERT INTO shard_map (id, version, json) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET version = ?1, json = ?2 WHERE ?1 > shard_map.version RETURNING version",
              [map.version, map.json]) { _ in true } ?? false
    }

    /// Room records held (for tests and operators' checks of §6.10).
    public var roomCount: Int {
        get throws(StoreError) { try query("SELECT count(*) FROM rooms", []) { Int(sqlite3_column_int64($0, 0)) } ?? 0 }
    }

    // MARK: SQLite plumbing

    /// A room row with nothing worth keeping (§6.10).
    private static let holdsNothing = "verifier IS NULL AND pairing_cycles = 0 AND last_activity IS NULL AND quota_day_start IS NULL"

    private func putEphemeral(_ room: RoomKey, _ kind: String, _ secret: String, _ expiresAt: UInt64, _ keyID: String?, _ publicKey: String?) throws(StoreError) {
        try run("INSERT OR REPLACE INTO ephemeral (room, kind, secret, expires_at, key_id, public_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            [room.hex, kind, secret, Int(expiresAt), keyID as Any, publicKey as Any])
    }

    public func probeWrite() throws(StoreError) {
        // Creating and dropping a table dirties the schema page, so the commit appends to the
        // WAL (or journal) as any write does, and fails as any write would on a full disk.
        try locked { () throws(StoreError) in
            do throws(StoreError) {
                try executeLocked("BEGIN IMMEDIATE; CREATE TABLE write_probe (x); DROP TABLE write_probe; COMMIT")
            } catch {
                _ = try? executeLocked("ROLLBACK")
                throw error
            }
        }
    }

    private func execute(_ sql: String) throws(StoreError) {
        try locked { () throws(StoreError) in try executeLocked(sql) }
    }

    private func executeLocked(_ sql: String) throws(StoreError) {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(error)
            throw StoreError("room database: \(message)")
        }
    }

    private func prepared(_ sql: String) throws(StoreError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else { throw failure() }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ values: [Any]) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case let text as String: sqlite3_bind_text(statement, index, text, -1, tether_sqlite_transient())
            case let integer as Int: sqlite3_bind_int64(statement, index, Int64(integer))
            default: sqlite3_bind_null(statement, index)
            }
        }
    }

    /// Runs `body` holding the connection's lock.
    private func locked<R>(_ body: () throws(StoreError) -> R) throws(StoreError) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Runs a statement.
    private func run(_ sql: String, _ values: [Any]) throws(StoreError) {
        _ = try locked { () throws(StoreError) in try runLocked(sql, values) }
    }

    /// Runs a statement; returns the rows it changed.
    @discardableResult
    private func runLocked(_ sql: String, _ values: [Any]) throws(StoreError) -> Int {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        bind(statement, values)
        var status = sqlite3_step(statement)
        while status == SQLITE_ROW { status = sqlite3_step(statement) }
        guard status == SQLITE_DONE else { throw failure() }
        return Int(sqlite3_changes(db))
    }

    /// The first row's value, or nil if there is none.
    private func query<R>(_ sql: String, _ values: [Any], _ row: (OpaquePointer) -> R) throws(StoreError) -> R? {
        try locked { () throws(StoreError) -> R? in
            let statement = try prepared(sql)
            defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
            bind(statement, values)
            let status = sqlite3_step(statement)
            guard status == SQLITE_ROW else {
                if status != SQLITE_DONE { throw failure() }
                return nil
            }
            let result = row(statement)
            // Finish RETURNING statements so the write commits.
            var rest = sqlite3_step(statement)
            while rest == SQLITE_ROW { rest = sqlite3_step(statement) }
            guard rest == SQLITE_DONE else { throw failure() }
            return result
        }
    }

    /// Every row's value.
    private func queryAll<R>(_ sql: String, _ values: [Any], _ row: (OpaquePointer) -> R) throws(StoreError) -> [R] {
        try locked { () throws(StoreError) in try queryAllLocked(sql, values, row) }
    }

    private func queryAllLocked<R>(_ sql: String, _ values: [Any], _ row: (OpaquePointer) -> R) throws(StoreError) -> [R] {
        let statement = try prepared(sql)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        bind(statement, values)
        var rows: [R] = []
        var status = sqlite3_step(statement)
        while status == SQLITE_ROW {
            rows.append(row(statement))
            status = sqlite3_step(statement)
        }
        guard status == SQLITE_DONE else { throw failure() }
        return rows
    }

    /// The connection's last error as a `StoreError`: SQLite's text (never a bound value, so never
    /// a key, secret or room). Called with `lock` held.
    private func failure() -> StoreError {
        StoreError("room database: \(String(cString: sqlite3_errmsg(db)))")
    }
}

private func text(_ statement: OpaquePointer, _ column: Int32) -> String? {
    guard sqlite3_column_type(statement, column) != SQLITE_NULL, let bytes = sqlite3_column_text(statement, column) else { return nil }
    return String(cString: bytes)
}
