import Glibc
public import TetherWire

/// A `RoomStore` that waits a fixed time before every call, then forwards it to `base`: a stand-in
/// for a networked database (one round trip per call) on a machine that has none. The relay's
/// promise is that storage never stalls its loops, so a benchmark or a test wraps its real store
/// in this and checks that the splice does not notice.
///
/// The wait is a blocking sleep on the calling thread — exactly what a synchronous database
/// driver does to a store lane — and happens before `base`'s own lock (SQLite serialises its one
/// connection), so lanes wait in parallel, as they would on a database with several connections.
public final class DelayedRoomStore: RoomStore, Sendable {
    public let base: any RoomStore
    /// Microseconds slept before each call.
    public let delayMicroseconds: UInt32

    public init(_ base: any RoomStore, delayMicroseconds: UInt32) {
        self.base = base
        self.delayMicroseconds = delayMicroseconds
    }

    /// `base` with `milliseconds` of latency per call.
    public convenience init(_ base: any RoomStore, delayMilliseconds milliseconds: Double) {
        self.init(base, delayMicroseconds: UInt32(max(0, milliseconds * 1000).rounded()))
    }

    /// One round trip's worth of waiting (none at 0, so a zero delay measures the base store).
    @inline(__always)
    private func wait() {
        if delayMicroseconds > 0 { usleep(delayMicroseconds) }
    }

    public func probeWrite() throws(StoreError) { wait(); try base.probeWrite() }
    public func verifier(of room: RoomKey) throws(StoreError) -> String? { wait(); return try base.verifier(of: room) }
    public func admissionState(of room: RoomKey) throws(StoreError) -> AdmissionState { wait(); return try base.admissionState(of: room) }
    /// One delay: a backend answers the whole admission step in one round trip.
    public func admission(_ query: AdmissionQuery, of room: RoomKey) throws(StoreError) -> AdmissionRead { wait(); return try base.admission(query, of: room) }
    public func pairingCycles(of room: RoomKey) throws(StoreError) -> Int { wait(); return try base.pairingCycles(of: room) }
    public func setPairingCycles(_ cycles: Int, of room: RoomKey) throws(StoreError) { wait(); try base.setPairingCycles(cycles, of: room) }
    public func touch(_ room: RoomKey, at now: UInt64) throws(StoreError) { wait(); try base.touch(room, at: now) }

    public func consumeTicket(_ ticket: String, in room: RoomKey, now: UInt64) throws(StoreError) -> TicketRecord? {
        wait()
        return try base.consumeTicket(ticket, in: room, now: now)
    }

    public func putRegistrationToken(_ token: String, _ record: RegistrationTokenRecord, in room: RoomKey) throws(StoreError) {
        wait()
        try base.putRegistrationToken(token, record, in: room)
    }

    public func putChallenge(_ challenge: String, expiresAt: UInt64, in room: RoomKey) throws(StoreError) {
        wait()
        try base.putChallenge(challenge, expiresAt: expiresAt, in: room)
    }

    public func liveChallenges(in room: RoomKey, now: UInt64) throws(StoreError) -> Int { wait(); return try base.liveChallenges(in: room, now: now) }

    public func consumeChallenge(_ challenge: String, in room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        wait()
        return try base.consumeChallenge(challenge, in: room, now: now)
    }

    public func putTicket(_ ticket: String, _ record: TicketRecord, in room: RoomKey) throws(StoreError) { wait(); try base.putTicket(ticket, record, in: room) }

    public func registrationToken(_ token: String, in room: RoomKey, now: UInt64) throws(StoreError) -> RegistrationTokenRecord? {
        wait()
        return try base.registrationToken(token, in: room, now: now)
    }

    public func deleteRegistrationToken(_ token: String, in room: RoomKey) throws(StoreError) { wait(); try base.deleteRegistrationToken(token, in: room) }

    @discardableResult
    public func setVerifier(_ verifier: String, of room: RoomKey, now: UInt64) throws(StoreError) -> Bool {
        wait()
        return try base.setVerifier(verifier, of: room, now: now)
    }

    public func assertionCounter(for keyID: String, in room: RoomKey) throws(StoreError) -> UInt32? { wait(); return try base.assertionCounter(for: keyID, in: room) }

    public func setAssertionCounter(_ counter: UInt32, for keyID: String, in room: RoomKey) throws(StoreError) {
        wait()
        try base.setAssertionCounter(counter, for: keyID, in: room)
    }

    public func quota(of room: RoomKey) throws(StoreError) -> QuotaRecord? { wait(); return try base.quota(of: room) }
    public func setQuota(_ record: QuotaRecord, of room: RoomKey) throws(StoreError) { wait(); try base.setQuota(record, of: room) }
    public func deleteRoom(_ key: RoomKey) throws(StoreError) { wait(); try base.deleteRoom(key) }
    public func pruneExpired(now: UInt64) throws(StoreError) { wait(); try base.pruneExpired(now: now) }

    public func idleRooms(lastActivityBefore cutoff: UInt64, limit: Int) throws(StoreError) -> [RoomKey] {
        wait()
        return try base.idleRooms(lastActivityBefore: cutoff, limit: limit)
    }

    public func lastActivity(of key: RoomKey) throws(StoreError) -> UInt64? { wait(); return try base.lastActivity(of: key) }
    public var roomCount: Int { get throws(StoreError) { wait(); return try base.roomCount } }
    public func shardMap() throws(StoreError) -> ShardMap? { wait(); return try base.shardMap() }
    public func publishShardMap(_ map: ShardMap) throws(StoreError) -> Bool { wait(); return try base.publishShardMap(map) }

}
