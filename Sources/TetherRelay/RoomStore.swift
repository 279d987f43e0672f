public import TetherWire
import Foundation

/// What a room persists (relay.md §6.2), behind a protocol so the state machine is tested with
/// `InMemoryRoomStore` and the relay runs on SQLite. Called on the room's loop, in order, so each
/// call is atomic with respect to the room. Times are milliseconds since 1970.
public protocol RoomStore: AnyObject {
    /// The registered verifier `V` (as supplied, b64) once the room is established.
    func verifier(of room: RoomKey) -> String?
    /// What a Proof needs (§3.4–§3.5), in one read: the verifier and the pairing-cycle count.
    func admissionState(of room: RoomKey) -> AdmissionState
    func pairingCycles(of room: RoomKey) -> Int
    /// 0 removes the count (§6.10: a record holding nothing else goes with it; a room never
    /// parked in stays without one).
    func setPairingCycles(_ cycles: Int, of room: RoomKey)
    /// Refreshes the established room's idle TTL.
    func touch(_ room: RoomKey, at now: UInt64)
    /// Deletes the ticket and returns its record if it existed and had not expired.
    func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) -> TicketRecord?
    func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey)
    // Ephemeral records (§4): expired records read as absent.
    func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey)
    /// Deletes expired challenges and counts the live ones.
    func liveChallenges(in room: RoomKey, now: UInt64) -> Int
    /// Deletes the challenge; true if it existed and had not expired.
    func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) -> Bool
    func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey)
    func registrationToken(_ token: String, in room: RoomKey, now: UInt64) -> RegistrationTokenRecord?
    func deleteRegistrationToken(_ token: String, in room: RoomKey)
    /// Establishes the room: stores `V` (as supplied), refreshes its activity and drops its
    /// pairing-cycle count.
    func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64)
    /// The highest App Attest assertion counter seen for a key in a room (§4.3 step 6); it goes
    /// with the room at teardown.
    func assertionCounter(for keyID: String, in room: RoomKey) -> UInt32?
    func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey)

    /// The daily byte quota record (§3.12), if one was ever persisted.
    func quota(of room: RoomKey) -> QuotaRecord?
    func setQuota(_ record: QuotaRecord, of room: RoomKey)
    /// Removes everything stored for the room.
    func deleteRoom(_ key: RoomKey)

    // Housekeeping (§6.4), across all rooms.
    /// Deletes expired tickets, registration tokens and challenges everywhere, ends quota records
    /// whose 24 h window is over, drops room records left holding nothing (§6.10), and gives an
    /// established room with no recorded activity the activity `now` (never reaped on sight).
    func pruneExpired(now: UInt64)
    /// Up to `limit` established rooms whose last activity is before `cutoff` (by key: the
    /// store never holds names).
    func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) -> [RoomKey]
    /// When an established room was last active (nil if unknown or not established).
    func lastActivity(of key: RoomKey) -> UInt64?

    // Sharding (§8.3): the map lives next to the durable room records, shared by every node.
    /// The current shard map, if one was ever published (none: this node owns every bucket).
    func shardMap() -> ShardMap?
    /// Stores `map` if its version is above the stored one (versions only grow); true if stored.
    func publishShardMap(_ map: ShardMap) -> Bool
}

/// The same calls by name, for tests and one-off callers; a room's machine computes its key once.
extension RoomStore {
    public func verifier(of room: RoomName) -> String? { verifier(of: RoomKey(room)) }
    public func pairingCycles(of room: RoomName) -> Int { pairingCycles(of: RoomKey(room)) }
    public func setPairingCycles(_ cycles: Int, of room: RoomName) { setPairingCycles(cycles, of: RoomKey(room)) }
    public func touch(_ room: RoomName, at now: UInt64) { touch(RoomKey(room), at: now) }
    public func consumeTicket(_ ticket: String, in room: RoomName, now: UInt64) -> TicketRecord? { consumeTicket(ticket, in: RoomKey(room), now: now) }
    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomName) {
        putRegistrationToken(token, record, in: RoomKey(room))
    }
    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomName) { putChallenge(challenge, expiresAt: expiresAt, in: RoomKey(room)) }
    public func liveChallenges(in room: RoomName, now: UInt64) -> Int { liveChallenges(in: RoomKey(room), now: now) }
    public func consumeChallenge(_ challenge: String, in room: RoomName, now: UInt64) -> Bool { consumeChallenge(challenge, in: RoomKey(room), now: now) }
    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomName) { putTicket(ticket, record, in: RoomKey(room)) }
    public func registrationToken(_ token: String, in room: RoomName, now: UInt64) -> RegistrationTokenRecord? {
        registrationToken(token, in: RoomKey(room), now: now)
    }
    public func deleteRegistrationToken(_ token: String, in room: RoomName) { deleteRegistrationToken(token, in: RoomKey(room)) }
    public func setVerifier(_ verifier: String, of room: RoomName, now: UInt64) { setVerifier(verifier, of: RoomKey(room), now: now) }
    public func quota(of room: RoomName) -> QuotaRecord? { quota(of: RoomKey(room)) }
    public func setQuota(_ record: QuotaRecord, of room: RoomName) { setQuota(record, of: RoomKey(room)) }
    public func deleteRoom(_ room: RoomName) { deleteRoom(RoomKey(room)) }
    public func lastActivity(of room: RoomName) -> UInt64? { lastActivity(of: RoomKey(room)) }
}

/// A room's admission-time record.
public struct AdmissionState: Sendable, Equatable {
    public var verifier: String?
    public var pairingCycles: Int

    public init(verifier: String?, pairingCycles: Int) {
        self.verifier = verifier
        self.pairingCycles = pairingCycles
    }
}

/// A room's relayed bytes in its current 24-hour window.
public struct QuotaRecord: Sendable, Equatable {
    /// The quota window (§3.12): 24 hours.
    public static let window: UInt64 = 86_400_000
    public var dayStart: UInt64
    public var bytes: Int64

    public init(dayStart: UInt64, bytes: Int64) {
        self.dayStart = dayStart
        self.bytes = bytes
    }
}

/// A ticket minted by `/attest`: single use, bound to the attested key.
public struct TicketRecord: Sendable, Equatable {
    public let expiresAt: UInt64
    public let keyID: String
    public let publicKey: String

    public init(expiresAt: UInt64, keyID: String, publicKey: String) {
        self.expiresAt = expiresAt
        self.keyID = keyID
        self.publicKey = publicKey
    }
}

/// A registration token minted for every admitted phone.
public struct RegistrationTokenRecord: Sendable, Equatable {
    public let expiresAt: UInt64
    /// Present when the phone was admitted with a ticket (attestation mode).
    public let attestKeyID: String?
    public let attestPublicKey: String?

    public init(expiresAt: UInt64, attestKeyID: String? = nil, attestPublicKey: String? = nil) {
        self.expiresAt = expiresAt
        self.attestKeyID = attestKeyID
        self.attestPublicKey = attestPublicKey
    }
}

/// The in-memory store: the test double, and `RELAY_DB=:memory:`. Rooms on different loops share
/// it, so every access takes its lock.
public final class InMemoryRoomStore: RoomStore, @unchecked Sendable {
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

    private let lock = NSLock()
    /// By key, like the SQLite store, so both answer housekeeping the same way.
    private var rooms: [RoomKey: Room] = [:]
    private var map: ShardMap?

    public init() {}

    private func read<R>(_ body: ([RoomKey: Room]) -> R) -> R { lock.withLock { body(rooms) } }
    private func change<R>(_ body: (inout [RoomKey: Room]) -> R) -> R { lock.withLock { body(&rooms) } }

    public func verifier(of room: RoomKey) -> String? { read { $0[room]?.verifier } }
    public func admissionState(of room: RoomKey) -> AdmissionState {
        read { AdmissionState(verifier: $0[room]?.verifier, pairingCycles: $0[room]?.pairingCycles ?? 0) }
    }
    public func pairingCycles(of room: RoomKey) -> Int { read { $0[room]?.pairingCycles ?? 0 } }
    public func setPairingCycles(_ cycles: Int, of room: RoomKey) {
        let key = room
        change { rooms in
            guard cycles > 0 else {
                rooms[key]?.pairingCycles = 0
                if rooms[key]?.holdsNothing == true { rooms[key] = nil }
                return
            }
            rooms[key, default: Room()].pairingCycles = cycles
        }
    }
    public func touch(_ room: RoomKey, at now: UInt64) { change { $0[room, default: Room()].lastActivity = now } }

    public func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) -> TicketRecord? {
        change { rooms in
            guard let record = rooms[room]?.tickets.removeValue(forKey: ticket) else { return nil }
            return record.expiresAt < now ? nil : record
        }
    }

    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) {
        change { $0[room, default: Room()].registrationTokens[token] = record }
    }

    public func quota(of room: RoomKey) -> QuotaRecord? { read { $0[room]?.quota } }
    public func setQuota(_ record: QuotaRecord, of room: RoomKey) { change { $0[room, default: Room()].quota = record } }

    public func deleteRoom(_ key: RoomKey) { change { $0[key] = nil } }

    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) {
        change { $0[room, default: Room()].challenges[challenge] = expiresAt }
    }

    public func liveChallenges(in room: RoomKey, now: UInt64) -> Int {
        change { rooms in
            guard var entry = rooms[room] else { return 0 }
            entry.challenges = entry.challenges.filter { $0.value >= now }
            rooms[room] = entry
            return entry.challenges.count
        }
    }

    public func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) -> Bool {
        change { rooms in
            guard let expiresAt = rooms[room]?.challenges.removeValue(forKey: challenge) else { return false }
            return expiresAt >= now
        }
    }

    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) { change { $0[room, default: Room()].tickets[ticket] = record } }

    public func registrationToken(_ token: String, in room: RoomKey, now: UInt64) -> RegistrationTokenRecord? {
        read { rooms in rooms[room]?.registrationTokens[token].flatMap { $0.expiresAt >= now ? $0 : nil } }
    }

    public func deleteRegistrationToken(_ token: String, in room: RoomKey) { change { $0[room]?.registrationTokens[token] = nil } }

    public func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) {
        change { rooms in
            rooms[room, default: Room()].verifier = verifier
            rooms[room]?.lastActivity = now
            rooms[room]?.pairingCycles = 0
        }
    }

    public func pruneExpired(now: UInt64) {
        change { rooms in
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

    public func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) -> [RoomKey] {
        read { rooms in
            Array(rooms.lazy.filter { $0.value.verifier != nil && ($0.value.lastActivity ?? .max) < cutoff }.map(\.key).prefix(limit))
        }
    }

    public func lastActivity(of key: RoomKey) -> UInt64? {
        read { rooms in rooms[key].flatMap { $0.verifier != nil ? $0.lastActivity : nil } }
    }

    public func assertionCounter(for keyID: String, in room: RoomKey) -> UInt32? { read { $0[room]?.assertionCounters[keyID] } }
    public func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) {
        change { $0[room, default: Room()].assertionCounters[keyID] = counter }
    }

    public func shardMap() -> ShardMap? { lock.withLock { map } }

    public func publishShardMap(_ map: ShardMap) -> Bool {
        lock.withLock {
            guard map.version > self.map?.version ?? -1 else { return false }
            self.map = map
            return true
        }
    }

    // Test helpers.
    public var roomCount: Int { read { $0.count } }
    public func setVerifier(_ verifier: String?, of room: RoomName) { change { $0[RoomKey(room), default: Room()].verifier = verifier } }
    public func room(_ room: RoomName) -> Room? { read { $0[RoomKey(room)] } }
}
