public import TetherWire

/// The relay's store on PostgreSQL (`RELAY_DB=postgres://…`), shared by every node of a cluster.
/// Each guarantee of relay.md §6.9 is kept inside one statement — a ticket or challenge consumed by
/// `DELETE … RETURNING` (one winner), the first verifier by an upsert whose update tests that none
/// is stored, the shard map by an upsert that only raises the version — so racing nodes cannot
/// break them; a teardown deletes a room's rows of every table in one statement. A Proof's whole
/// storage step is one statement, so one round trip (`admission`). Rows are keyed by `RoomKey`,
/// never by the room name; values are bound parameters, never part of the SQL text.
public final class PostgresRoomStore: RoomStore {
    public let pool: PostgresPool

    /// Migrates the relay's schema (`PostgresSchema`) unless `migrating` is false (an operator
    /// command, which works only on a schema a relay made).
    public init(pool: PostgresPool, migrating: Bool = true) throws(StoreError) {
        self.pool = pool
        if migrating { try PostgresSchema.migrate(.relay, pool: pool) }
    }


    /// Assigning a transaction id makes the commit write a WAL record: it fails when the server
    /// cannot write, where a read would still answer.
    public func probeWrite() throws(StoreError) {
        _ = try pool.execute("probe_write", "SELECT txid_current()", [])
    }

    // MARK: Admission

    public func verifier(of room: RoomKey) throws(StoreError) -> String? {
        try pool.execute("room_verifier", "SELECT verifier FROM relay_rooms WHERE room = $1", [room.hex]).first?[0] ?? nil
    }

    public func admissionState(of room: RoomKey) throws(StoreError) -> AdmissionState {
        let row = try pool.execute("room_admission_state", "SELECT verifier, pairing_cycles FROM relay_rooms WHERE room = $1", [room.hex]).first
        return AdmissionState(verifier: row?[0] ?? nil, pairingCycles: row.map { int($0[1]) } ?? 0)
    }

    public func admission(_ query: AdmissionQuery, of room: RoomKey) throws(StoreError) -> AdmissionRead {
        // The ticket is consumed in the same statement, only when the room has no verifier: the
        // data-modifying CTE runs whether or not the outer query reads it.
        let row = try pool.execute("room_admission", """
            WITH r AS (SELECT verifier, pairing_cycles, quota_day_start, quota_bytes, last_activity FROM relay_rooms WHERE room = $1),
            t AS (DELETE FROM relay_ephemeral WHERE $2::text IS NOT NULL AND room = $1 AND kind = 'ticket' AND secret = $2
                  AND NOT EXISTS (SELECT 1 FROM r WHERE verifier IS NOT NULL)
                  RETURNING expires_at, key_id, public_key)
            SELECT r.verifier, r.pairing_cycles, r.quota_day_start, r.quota_bytes, t.expires_at, t.key_id, t.public_key, r.last_activity
            FROM (SELECT 1) AS one LEFT JOIN r ON true LEFT JOIN t ON true
            """, [room.hex, query.ticket]).first ?? []
        guard row.count == 8 else { throw StoreError("database: unexpected answer to the admission read") }
        var read = AdmissionRead(state: AdmissionState(verifier: row[0], pairingCycles: row[1].map { int($0) } ?? 0))
        if row[0] != nil, let last = row[7] { read.lastActivity = time(last) }
        if let dayStart = row[2], let bytes = row[3] { read.quota = QuotaRecord(dayStart: time(dayStart), bytes: Int64(bytes) ?? 0) }
        if let expiresAt = row[4] {
            let ticket = TicketRecord(expiresAt: time(expiresAt), keyID: row[5] ?? "", publicKey: row[6] ?? "")
            read.ticket = ticket.expiresAt >= query.now ? ticket : nil
        }
        return read
    }

    public func pairingCycles(of room: RoomKey) throws(StoreError) -> Int {
        try pool.execute("room_cycles", "SELECT pairing_cycles FROM relay_rooms WHERE room = $1", [room.hex]).first.map { int($0[0]) } ?? 0
    }

    public func setPairingCycles(_ cycles: Int, of room: RoomKey) throws(StoreError) {
        guard cycles > 0 else {
            // A record holding only the count goes; otherwise the count is zeroed. The update
            // skips a row the CTE deleted (both see the statement's snapshot).
            _ = try pool.execute("room_cycles_reset", """
                WITH d AS (DELETE FROM relay_rooms WHERE room = $1 AND \(Self.holdsNothingButCycles) RETURNING room)
                UPDATE relay_rooms SET pairing_cycles = 0 WHERE room = $1 AND pairing_cycles <> 0 AND NOT EXISTS (SELECT 1 FROM d)
                """, [room.hex])
            return
        }
        _ = try pool.execute("room_cycles_set", """
            INSERT INTO relay_rooms (room, bucket, pairing_cycles) VALUES ($1, $2, $3)
            ON CONFLICT (room) DO UPDATE SET pairing_cycles = EXCLUDED.pairing_cycles
            """, [room.hex, String(room.bucket), String(cycles)])
    }

    public func touch(_ room: RoomKey, at now: UInt64) throws(StoreError) {
        _ = try pool.execute("room_touch", "UPDATE relay_rooms SET last_activity = $2 WHERE room = $1 AND verifier IS NOT NULL", [room.hex, text(now)])
    }

    public func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        // The test is in the statement: a verifier already stored is never overwritten.
        try pool.execute("room_set_verifier", """
            INSERT INTO relay_rooms (room, bucket, verifier, last_activity) VALUES ($1, $2, $3, $4)
            ON CONFLICT (room) DO UPDATE SET verifier = EXCLUDED.verifier, last_activity = EXCLUDED.last_activity, pairing_cycles = 0
            WHERE relay_rooms.verifier IS NULL
            """, [room.hex, String(room.bucket), verifier, text(now)]).affected > 0
    }

    // MARK: Ephemeral records

    public func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) throws(StoreError) -> TicketRecord? {
        guard let row = try pool.execute("ticket_consume", """
            DELETE FROM relay_ephemeral WHERE room = $1 AND kind = 'ticket' AND secret = $2 RETURNING expires_at, key_id, public_key
            """, [room.hex, ticket]).first, let expiresAt = row[0] else { return nil }
        let record = TicketRecord(expiresAt: time(expiresAt), keyID: row[1] ?? "", publicKey: row[2] ?? "")
        return record.expiresAt >= now ? record : nil
    }

    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "ticket", ticket, record.expiresAt, record.keyID, record.publicKey)
    }

    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "regtoken", token, record.expiresAt, record.attestKeyID, record.attestPublicKey)
    }

    public func registrationToken(_ token: String, in room: RoomKey, now: UInt64) throws(StoreError) -> RegistrationTokenRecord? {
        guard let row = try pool.execute("regtoken_read", """
            SELECT expires_at, key_id, public_key FROM relay_ephemeral WHERE room = $1 AND kind = 'regtoken' AND secret = $2
            """, [room.hex, token]).first, let expiresAt = row[0] else { return nil }
        let record = RegistrationTokenRecord(expiresAt: time(expiresAt), attestKeyID: row[1], attestPublicKey: row[2])
        return record.expiresAt >= now ? record : nil
    }

    public func deleteRegistrationToken(_ token: String, in room: RoomKey) throws(StoreError) {
        _ = try pool.execute("regtoken_delete", "DELETE FROM relay_ephemeral WHERE room = $1 AND kind = 'regtoken' AND secret = $2", [room.hex, token])
    }

    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) throws(StoreError) {
        try putEphemeral(room, "challenge", challenge, expiresAt, nil, nil)
    }

    public func liveChallenges(in room: RoomKey, now: UInt64) throws(StoreError) -> Int {
        // Expired ones go in the same statement; the count reads the snapshot, so it filters too.
        try pool.execute("challenge_live", """
            WITH d AS (DELETE FROM relay_ephemeral WHERE room = $1 AND kind = 'challenge' AND expires_at < $2)
            SELECT count(*) FROM relay_ephemeral WHERE room = $1 AND kind = 'challenge' AND expires_at >= $2
            """, [room.hex, text(now)]).first.map { int($0[0]) } ?? 0
    }

    public func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        guard let expiresAt = try pool.execute("challenge_consume", """
            DELETE FROM relay_ephemeral WHERE room = $1 AND kind = 'challenge' AND secret = $2 RETURNING expires_at
            """, [room.hex, challenge]).first?[0] ?? nil else { return false }
        return time(expiresAt) >= now
    }

    private func putEphemeral(_ room: RoomKey, _ kind: String, _ secret: String, _ expiresAt: UInt64, _ keyID: String?, _ publicKey: String?) throws(StoreError) {
        _ = try pool.execute("ephemeral_put", """
            INSERT INTO relay_ephemeral (room, kind, secret, expires_at, key_id, public_key) VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (room, kind, secret) DO UPDATE SET expires_at = EXCLUDED.expires_at, key_id = EXCLUDED.key_id, public_key = EXCLUDED.public_key
            """, [room.hex, kind, secret, text(expiresAt), keyID, publicKey])
    }

    // MARK: Counters and quota

    public func assertionCounter(for keyID: String, in room: RoomKey) throws(StoreError) -> UInt32? {
        guard let value = try pool.execute("counter_read", "SELECT counter FROM relay_assertion_counters WHERE room = $1 AND key_id = $2",
                                      [room.hex, keyID]).first?[0] ?? nil else { return nil }
        return UInt32(truncatingIfNeeded: Int64(value) ?? 0)
    }

    public func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) throws(StoreError) {
        _ = try pool.execute("counter_set", """
            INSERT INTO relay_assertion_counters (room, key_id, counter) VALUES ($1, $2, $3)
            ON CONFLICT (room, key_id) DO UPDATE SET counter = EXCLUDED.counter
            """, [room.hex, keyID, String(counter)])
    }

    public func quota(of room: RoomKey) throws(StoreError) -> QuotaRecord? {
        guard let row = try pool.execute("quota_read", "SELECT quota_day_start, quota_bytes FROM relay_rooms WHERE room = $1 AND quota_day_start IS NOT NULL",
                                    [room.hex]).first, let dayStart = row[0] else { return nil }
        return QuotaRecord(dayStart: time(dayStart), bytes: row[1].flatMap { Int64($0) } ?? 0)
    }

    public func setQuota(_ record: QuotaRecord, of room: RoomKey) throws(StoreError) {
        _ = try pool.execute("quota_set", """
            INSERT INTO relay_rooms (room, bucket, quota_day_start, quota_bytes) VALUES ($1, $2, $3, $4)
            ON CONFLICT (room) DO UPDATE SET quota_day_start = EXCLUDED.quota_day_start, quota_bytes = EXCLUDED.quota_bytes
            """, [room.hex, String(room.bucket), text(record.dayStart), String(record.bytes)])
    }

    public func deleteRoom(_ key: RoomKey) throws(StoreError) {
        // One statement: the room's rows in every table go together or not at all.
        _ = try pool.execute("room_delete", """
            WITH e AS (DELETE FROM relay_ephemeral WHERE room = $1), c AS (DELETE FROM relay_assertion_counters WHERE room = $1)
            DELETE FROM relay_rooms WHERE room = $1
            """, [key.hex])
    }

    // MARK: Housekeeping

    public func pruneExpired(now: UInt64) throws(StoreError) {
        let cutoff = now >= QuotaRecord.window ? text(now - QuotaRecord.window) : nil
        try pool.withConnection { (connection) throws(StoreError) in
            try connection.transaction { () throws(StoreError) in
                try connection.execute("prune_ephemeral", "DELETE FROM relay_ephemeral WHERE expires_at < $1", [text(now)])
                try connection.execute("prune_seed_activity", "UPDATE relay_rooms SET last_activity = $1 WHERE verifier IS NOT NULL AND last_activity IS NULL", [text(now)])
                if let cutoff {
                    try connection.execute("prune_quota", """
                        UPDATE relay_rooms SET quota_day_start = NULL, quota_bytes = NULL WHERE quota_day_start IS NOT NULL AND quota_day_start <= $1
                        """, [cutoff])
                }
                try connection.execute("prune_empty", "DELETE FROM relay_rooms WHERE \(Self.holdsNothingButCycles) AND pairing_cycles = 0")
            }
        }
    }

    public func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) throws(StoreError) -> [RoomKey] {
        try pool.execute("rooms_idle", "SELECT room, bucket FROM relay_rooms WHERE verifier IS NOT NULL AND last_activity < $1 LIMIT $2",
                    [text(cutoff), String(limit)]).rows.compactMap { row in
            guard let hex = row[0] else { return nil }
            return RoomKey(hex: hex, bucket: row[1].map { int($0) } ?? -1)
        }
    }

    public func lastActivity(of key: RoomKey) throws(StoreError) -> UInt64? {
        guard let value = try pool.execute("room_last_activity", "SELECT last_activity FROM relay_rooms WHERE room = $1 AND verifier IS NOT NULL",
                                      [key.hex]).first?[0] ?? nil else { return nil }
        return time(value)
    }

    public var roomCount: Int {
        get throws(StoreError) { try pool.execute("rooms_count", "SELECT count(*) FROM relay_rooms", []).first.map { int($0[0]) } ?? 0 }
    }

    // MARK: Sharding

    public func shardMap() throws(StoreError) -> ShardMap? {
        // A row that no longer parses (edited by hand) reads as absent, as in the SQLite store.
        guard let json = try pool.execute("shardmap_read", "SELECT json FROM relay_shard_map WHERE id = 1", []).first?[0] ?? nil else { return nil }
        return try? ShardMap(json: Array(json.utf8))
    }

    public func publishShardMap(_ map: ShardMap) throws(StoreError) -> Bool {
        // The version test is inside the statement, so two nodes publishing at once cannot lower it.
        // Announced to every node's listener in the same statement (delivered at its commit).
        let published = try !pool.execute("shardmap_publish", """
            WITH p AS (INSERT INTO relay_shard_map (id, version, json) VALUES (1, $1, $2)
                ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, json = EXCLUDED.json WHERE relay_shard_map.version < EXCLUDED.version
                RETURNING version)
            SELECT version, pg_notify('\(Self.mapChannel)', version::text) FROM p
            """, [String(map.version), map.json]).rows.isEmpty
        // A map the operator publishes places every node: none is owed a share back any more. Best
        // effort, after the publication: a schema of an older build has no such column.
        if published { _ = try? pool.execute("shardmap_publish_settles", "UPDATE relay_nodes SET failed_over_at = NULL WHERE failed_over_at IS NOT NULL") }
        return published
    }

    /// A room row with nothing worth keeping but, perhaps, a pairing-cycle count (§6.10).
    private static let holdsNothingButCycles = "verifier IS NULL AND last_activity IS NULL AND quota_day_start IS NULL"
}

/// Times are bigint milliseconds: clamped into the signed range, order kept.
private func text(_ milliseconds: UInt64) -> String { String(Int64(clamping: milliseconds)) }
private func time(_ text: String) -> UInt64 { UInt64(clamping: Int64(text) ?? 0) }
private func int(_ text: String?) -> Int { text.flatMap { Int($0) } ?? 0 }
