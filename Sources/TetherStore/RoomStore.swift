public import TetherWire
import Foundation

/// What a room persists (relay.md §6.2), behind a protocol so the state machine is tested with
/// `InMemoryRoomStore` and the relay runs on SQLite or PostgreSQL. Calls block, so they are
/// made only on a `StoreExecutor` lane, never on an event loop; one room's calls come from one
/// lane, in the order the room issued them. Every call is safe from any thread and each is atomic
/// on its own (single-use secrets are consumed with a compare-and-swap, the first verifier is
/// written at most once), so several nodes sharing one database keep relay.md §6.9's outcomes.
/// Times are wall-clock milliseconds since 1970: they are persisted.
///
/// A call the backend could not make throws `StoreError` (a full disk, a database that is down):
/// a read is never answered "absent" and a write never "done" when it was not, so the relay
/// refuses what needs storage honestly and goes on splicing what does not.
public protocol RoomStore: AnyObject, Sendable {
    /// A write that leaves nothing behind: whether the store can write at all. A full disk still
    /// answers reads, so an outage is over only when this succeeds (the services' 1 s probe).
    func probeWrite() throws(StoreError)
    /// The registered verifier `V` (as supplied, b64) once the room is established.
    func verifier(of room: RoomKey) throws(StoreError) -> String?
    /// What a Proof needs (§3.4–§3.5), in one read: the verifier and the pairing-cycle count.
    func admissionState(of room: RoomKey) throws(StoreError) -> AdmissionState
    /// A Proof's whole storage step (`AdmissionQuery`): state and quota, and the ticket consumed
    /// only if the room has no verifier. The default makes three calls; a backend answers it in
    /// one round trip where it can (every call is a round trip on a networked database, and a
    /// reconnect storm makes one per room).
    func admission(_ query: AdmissionQuery, of room: RoomKey) throws(StoreError) -> AdmissionRead
    func pairingCycles(of room: RoomKey) throws(StoreError) -> Int
    /// 0 removes the count (§6.10: a record holding nothing else goes with it; a room never
    /// parked in stays without one).
    func setPairingCycles(_ cycles: Int, of room: RoomKey) throws(StoreError)
    /// Refreshes an established room's idle TTL; a room with no verifier is left as it is (a join
    /// that raced a `/delete` must not bring a record back).
    func touch(_ room: RoomKey, at now: UInt64) throws(StoreError)
    /// Deletes the ticket and returns its record if it existed and had not expired.
    func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) throws(StoreError) -> TicketRecord?
    func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) throws(StoreError)
    // Ephemeral records (§4): expired records read as absent.
    func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) throws(StoreError)
    /// Deletes expired challenges and counts the live ones.
    func liveChallenges(in room: RoomKey, now: UInt64) throws(StoreError) -> Int
    /// Deletes the challenge; true if it existed and had not expired.
    func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) throws(StoreError) -> Bool
    func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) throws(StoreError)
    func registrationToken(_ token: String, in room: RoomKey, now: UInt64) throws(StoreError) -> RegistrationTokenRecord?
    func deleteRegistrationToken(_ token: String, in room: RoomKey) throws(StoreError)
    /// Establishes the room: stores `V` (as supplied), refreshes its activity and drops its
    /// pairing-cycle count — only if no verifier is stored yet, tested inside the write itself, so
    /// a room's first verifier is written at most once even by racing nodes. False if one was.
    @discardableResult
    func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) throws(StoreError) -> Bool
    /// The highest App Attest assertion counter seen for a key in a room (§4.3 step 6); it goes
    /// with the room at teardown.
    func assertionCounter(for keyID: String, in room: RoomKey) throws(StoreError) -> UInt32?
    func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) throws(StoreError)

    /// The daily byte quota record (§3.12), if one was ever persisted.
    func quota(of room: RoomKey) throws(StoreError) -> QuotaRecord?
    func setQuota(_ record: QuotaRecord, of room: RoomKey) throws(StoreError)
    /// Removes everything stored for the room.
    func deleteRoom(_ key: RoomKey) throws(StoreError)

    // Housekeeping (§6.4), across all rooms.
    /// Deletes expired tickets, registration tokens and challenges everywhere, ends quota records
    /// whose 24 h window is over, drops room records left holding nothing (§6.10), and gives an
    /// established room with no recorded activity the activity `now` (never reaped on sight).
    func pruneExpired(now: UInt64) throws(StoreError)
    /// Up to `limit` established rooms whose last activity is before `cutoff` (by key: the
    /// store never holds names).
    func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) throws(StoreError) -> [RoomKey]
    /// When an established room was last active (nil if unknown or not established).
    func lastActivity(of key: RoomKey) throws(StoreError) -> UInt64?
    /// Room records held, of any kind (operators' and tests' check of §6.10).
    var roomCount: Int { get throws(StoreError) }

    // Sharding (§8.3): the map lives next to the durable room records, shared by every node.
    /// The current shard map, if one was ever published (none: this node owns every bucket).
    func shardMap() throws(StoreError) -> ShardMap?
    /// Stores `map` if its version is above the stored one (versions only grow); true if stored.
    func publishShardMap(_ map: ShardMap) throws(StoreError) -> Bool
}

/// The same calls by name, for tests and one-off callers; a room's machine computes its key once.
extension RoomStore {
    public func verifier(of room: RoomName) throws(StoreError) -> String? { try verifier(of: RoomKey(room)) }
    public func pairingCycles(of room: RoomName) throws(StoreError) -> Int { try pairingCycles(of: RoomKey(room)) }
    public func setPairingCycles(_ cycles: Int, of room: RoomName) throws(StoreError) { try setPairingCycles(cycles, of: RoomKey(room)) }
    public func touch(_ room: RoomName, at now: UInt64) throws(StoreError) { try touch(RoomKey(room), at: now) }
    public func consumeTicket(_ ticket: String, in room: RoomName, now: UInt64) throws(StoreError) -> TicketRecord? { try consumeTicket(ticket, in: RoomKey(room), now: now) }
    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomName) throws(StoreError) {
        try putRegistrationToken(token, record, in: RoomKey(room))
    }
    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomName) throws(StoreError) { try putChallenge(challenge, expiresAt: expiresAt, in: RoomKey(room)) }
    public func liveChallenges(in room: RoomName, now: UInt64) throws(StoreError) -> Int { try liveChallenges(in: RoomKey(room), now: now) }
    public func consumeChallenge(_ challenge: String, in room: RoomName, now: UInt64) throws(StoreError) -> Bool { try consumeChallenge(challenge, in: RoomKey(room), now: now) }
    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomName) throws(StoreError) { try putTicket(ticket, record, in: RoomKey(room)) }
    public func registrationToken(_ token: String, in room: RoomName, now: UInt64) throws(StoreError) -> RegistrationTokenRecord? {
        try registrationToken(token, in: RoomKey(room), now: now)
    }
    public func deleteRegistrationToken(_ token: String, in room: RoomName) throws(StoreError) { try deleteRegistrationToken(token, in: RoomKey(room)) }
    @discardableResult
    public func setVerifier(_ verifier: String, of room: RoomName, now: UInt64) throws(StoreError) -> Bool { try setVerifier(verifier, of: RoomKey(room), now: now) }
    public func quota(of room: RoomName) throws(StoreError) -> QuotaRecord? { try quota(of: RoomKey(room)) }
    public func setQuota(_ record: QuotaRecord, of room: RoomName) throws(StoreError) { try setQuota(record, of: RoomKey(room)) }
    public func deleteRoom(_ room: RoomName) throws(StoreError) { try deleteRoom(RoomKey(room)) }
    public func lastActivity(of room: RoomName) throws(StoreError) -> UInt64? { try lastActivity(of: RoomKey(room)) }
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
