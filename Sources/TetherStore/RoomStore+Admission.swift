/// What a Proof asks of storage (relay.md §3.4–§3.5), as one step: the room's admission record and
/// quota, and — only when the room turns out not to be established — the ticket consumed. A room
/// issues one at a time and waits for its answer; nothing else of that room's admission runs
/// meanwhile, so the pairing-cycle read-increment-write never interleaves with another's.
public struct AdmissionQuery: Sendable, Equatable {
    /// The ticket an attested-mode phone presented, to consume if the room has no verifier.
    public var ticket: String?
    /// Wall-clock ms: a ticket that expired before it is refused.
    public var now: UInt64

    public init(ticket: String?, now: UInt64) {
        self.ticket = ticket
        self.now = now
    }
}

/// The answer to an `AdmissionQuery`.
public struct AdmissionRead: Sendable, Equatable {
    public var state: AdmissionState
    /// The persisted quota record (§3.12), so the splice never reads storage.
    public var quota: QuotaRecord?
    /// The consumed ticket's record; nil when none was asked for, it was missing or expired, or
    /// the room is established (a ticket is then irrelevant and left alone).
    public var ticket: TicketRecord?
    /// The established room's stored activity (wall ms), so a signed join writes a refresh only
    /// when the stored one is stale.
    public var lastActivity: UInt64?

    public init(state: AdmissionState, quota: QuotaRecord? = nil, ticket: TicketRecord? = nil, lastActivity: UInt64? = nil) {
        self.state = state
        self.quota = quota
        self.ticket = ticket
        self.lastActivity = lastActivity
    }
}

/// A write a room makes without waiting for it. Writes run on the room's store lane in the order
/// the room made them, before any later read of that room.
public enum RoomWrite: Sendable, Equatable {
    case pairingCycles(Int)
    /// Refresh an established room's idle TTL (wall-clock ms).
    case touch(at: UInt64)
    case registrationToken(String, RegistrationTokenRecord)
    case quota(QuotaRecord)
    case deleteRoom
}

extension RoomStore {
    /// Performs `query` for the room (on its store lane), call by call.
    public func admission(_ query: AdmissionQuery, of room: RoomKey) throws(StoreError) -> AdmissionRead {
        let state = try admissionState(of: room)
        var read = AdmissionRead(state: state, quota: try quota(of: room), lastActivity: state.verifier == nil ? nil : try lastActivity(of: room))
        if state.verifier == nil, let ticket = query.ticket {
            read.ticket = try consumeTicket(ticket, in: room, now: query.now)
        }
        return read
    }

    /// Performs `write` for the room (on its store lane).
    public func apply(_ write: RoomWrite, to room: RoomKey) throws(StoreError) {
        switch write {
        case let .pairingCycles(cycles): try setPairingCycles(cycles, of: room)
        case let .touch(now): try touch(room, at: now)
        case let .registrationToken(token, record): try putRegistrationToken(token, record, in: room)
        case let .quota(record): try setQuota(record, of: room)
        case .deleteRoom: try deleteRoom(room)
        }
    }
}
