import TetherSync
public import TetherWire

/// The in-memory store: the test double, and `RELAY_DB=:memory:`. Every store lane shares it, so
/// every access takes its lock.
public final class InMemoryRoomStore: RoomStore {
    public struct Room: Sendable, Equatable {
        public var verifier: String?
        public var pairingCycles = 0
        public var lastActivity: UInt64?
        public var tickets: [String: TicketRecord] = [:]
        public var registrationTokens: [String: RegistrationTokenRecord] = [:]
        public var quota: QuotaRecord?
        public var challenges: [String: UInt64] = [:]
        public var assertionCounters: [String: UInt32] = [:]

        var holdsNothing: Bool {
            verifier == nil && pairingCycles == 0 && lastActivity == nil && quota == nil && assertionCounters.isEmpty
                && tickets.isEmpty && registrationTokens.isEmpty && challenges.isEmpty
        }
    }

    /// Rooms by key, like the SQLite store, so both answer housekeeping the same way.
    private let rooms = Locked<[RoomKey: Room]>([:])
    private let map = Locked<ShardMap?>(nil)

    public init() {}

    private let failure = Locked<StoreError?>(nil)

    /// Makes every call fail with `failure` until it is set back to nil: a database that is down,
    /// for tests of what a service answers then.
    public func setFailure(_ failure: StoreError?) { self.failure.withLock { $0 = failure } }

    private let writeFailure = Locked<StoreError?>(nil)

    /// Makes every call that writes fail with `failure` while reads still answer: a full disk.
    public func setWriteFailure(_ failure: StoreError?) { writeFailure.withLock { $0 = failure } }

    private func available() throws(StoreError) {
        if let failure = failure.withLock({ $0 }) { throw failure }
    }
    private func read<R>(_ body: ([RoomKey: Room]) -> R) throws(StoreError) -> R {
        try available()
        return rooms.withLock { body($0) }
    }
    private func change<R>(_ body: (inout [RoomKey: Room]) -> R) throws(StoreError) -> R {
        try available()
        if let failure = writeFailure.withLock({ $0 }) { throw failure }
        return rooms.withLock { body(&$0) }
    }

    public func probeWrite() throws(StoreError) { try change { _ in } }

    public func verifier(of room: RoomKey) throws(StoreError) -> String? { try read { $0[room]?.verifier } }
    public func admissionState(of room: RoomKey) throws(StoreError) -> AdmissionState {
        try read { AdmissionState(verifier: $0[room]?.verifier, pairingCycles: $0[room]?.pairingCycles ?? 0) }
    }
    public func pairingCycles(of room: RoomKey) throws(StoreError) -> Int { try read { $0[room]?.pairingCycles ?? 0 } }
    public func setPairingCycles(_ cycles: Int, of room: RoomKey) throws(StoreError) {
        let key = room
        try change { rooms in
            guard cycles > 0 else {
                rooms[key]?.pairingCycles = 0
                if rooms[key]?.holdsNothing == true { rooms[key] = nil }
                return
            }
            rooms[key, default: Room()].pairingCycles = cycles
        }
    }
    public func touch(_ room: RoomKey, at now: UInt64) throws(StoreError) {
        try change { rooms in
            guard rooms[room]?.verifier != nil else { return }
            rooms[room]?.lastActivity = now
        }
    }

    public func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) throws(StoreError) -> TicketRecord? {
        try change { rooms in
            guard let record = rooms[room]?.tickets.removeValue(forKey: ticket) else { return nil }
            return record.expiresAt < now ? nil : record
        }
    }

    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) throws(StoreError) {
        try change { $0[room, default: Room()].registrationTokens[token] = record }
    }

    public func quota(of room: RoomKey) throws(StoreError) -> QuotaRecord? { try read { $0[room]?.quota } }
    public func setQuota(_ record: QuotaRecord, of room: RoomKey) throws(StoreError) { try change { $0[room, default: Room()].quota = record } }

    public func deleteRoom(_ key: RoomKey) throws(StoreError) { try change { $0[key] = nil } }

    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) throws(StoreError) {
        try change { $0[room, default: Room()].challenges[challenge] = expiresAt }
    }

    public func liveChallenges(in room: RoomKey, now: UInt64) throws(StoreError) -> Int {
        try change { rooms in
            guard var entry = rooms[room] else { return 0 }
            entry.challenges = entry.challenges.filter { $0.value >= now }
            rooms[room] = entry
            return entry.challenges.count
        }
    }

    public func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        try change { rooms in
            guard let expiresAt = rooms[room]?.challenges.removeValue(forKey: challenge) else { return false }
            return expiresAt >= now
        }
    }

    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) throws(StoreError) { try change { $0[room, default: Room()].tickets[ticket] = record } }

    public func registrationToken(_ token: String, in room: RoomKey, now: UInt64) throws(StoreError) -> RegistrationTokenRecord? {
        try read { rooms in rooms[room]?.registrationTokens[token].flatMap { $0.expiresAt >= now ? $0 : nil } }
    }

    public func deleteRegistrationToken(_ token: String, in room: RoomKey) throws(StoreError) { try change { $0[room]?.registrationTokens[token] = nil } }

    public func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        try change { rooms in
            guard rooms[room]?.verifier == nil else { return false }
            rooms[room, default: Room()].verifier = verifier
            rooms[room]?.lastActivity = now
            rooms[room]?.pairingCycles = 0
            return true
        }
    }

    public func pruneExpired(now: UInt64) throws(StoreError) {
        try change { rooms in
            for name in Array(rooms.keys) {
                var room = rooms[name]!
                room.tickets = room.tickets.filter { $0.value.expiresAt >= now }
                room.registrationTokens = room.registrationTokens.filter { $0.value.expiresAt >= now }
                room.challenges = room.challenges.filter { $0.value >= now }
                if room.verifier != nil, room.lastActivity == nil { room.lastActivity = now }
                if let quota = room.quota, now &- quota.dayStart >= QuotaRecord.window { room.quota = nil }
                rooms[name] = room.holdsNothing ? nil : room
            }
        }
    }

    public func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) throws(StoreError) -> [RoomKey] {
        try read { rooms in
            Array(rooms.lazy.filter { $0.value.verifier != nil && ($0.value.lastActivity ?? .max) < cutoff }.map(\.key).prefix(limit))
        }
    }

    public func lastActivity(of key: RoomKey) throws(StoreError) -> UInt64? {
        try read { rooms in rooms[key].flatMap { $0.verifier != nil ? $0.lastActivity : nil } }
    }

    public func assertionCounter(for keyID: String, in room: RoomKey) throws(StoreError) -> UInt32? { try read { $0[room]?.assertionCounters[keyID] } }
    public func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) throws(StoreError) {
        try change { $0[room, default: Room()].assertionCounters[keyID] = counter }
    }

    public func shardMap() throws(StoreError) -> ShardMap? {
        try available()
        return map.withLock { $0 }
    }

    public func publishShardMap(_ map: ShardMap) throws(StoreError) -> Bool {
        try available()
        return self.map.withLock { stored in
            guard map.version > stored?.version ?? -1 else { return false }
            stored = map
            return true
        }
    }

    // Test helpers.
    public var roomCount: Int { get throws(StoreError) { try read { $0.count } } }
    public func setVerifier(_ verifier: String?, of room: RoomName) { rooms.withLock { $0[RoomKey(room), default: Room()].verifier = verifier } }
    public func room(_ room: RoomName) -> Room? { rooms.withLock { $0[RoomKey(room)] } }
}
