public import TetherStore

/// A Proof's storage step, run on the room's store lane: the admission read, the signed join's
/// check against the verifier it read, and, for a phone whose Mac is in a pairing room, the write
/// of the registration token its Result will carry.
///
/// The token is written here, before the verdict reaches the loop, so that a Result never names a
/// token storage does not hold: with the write left behind the Result, a failed write (a full
/// disk) answered the phone with a token `/register` then called `bad token`. A write that fails
/// fails the whole step, and the Proof is closed 1011 `internal error` like a failed read.
public struct AdmissionLoad: Sendable, Equatable {
    /// What to read: the room's admission record and quota, and the ticket to consume if the room
    /// is not established.
    public var query: AdmissionQuery
    /// The signed join to verify against the verifier read, if the Proof carries a signature.
    public var join: JoinCheck?
    /// The registration token to write for a phone, if its Result may carry one.
    public var registrationToken: RegistrationTokenIssue?

    /// A storage step reading `query`, and checking `join` and writing `registrationToken` when
    /// given.
    public init(query: AdmissionQuery, join: JoinCheck? = nil, registrationToken: RegistrationTokenIssue? = nil) {
        self.query = query
        self.join = join
        self.registrationToken = registrationToken
    }

    /// Runs the step on `store` (on the room's lane): the read, the signature check, the token
    /// write. Throws when a store call fails.
    public func run(on store: any RoomStore, room: RoomKey) throws(StoreError) -> AdmissionAnswer {
        let read = try store.admission(query, of: room)
        // The signature check is CPU work: done here, on the lane, not on the splicing loop.
        let verified = JoinCheck.verdict(join, against: read)
        guard let issue = registrationToken, issue.isWritten(after: read) else {
            return AdmissionAnswer(read: read, joinVerified: verified, tokenStored: false)
        }
        try store.apply(.registrationToken(issue.token, issue.record(after: read)), to: room)
        return AdmissionAnswer(read: read, joinVerified: verified, tokenStored: true)
    }
}

/// The registration token a phone's Proof will be answered with, if it is admitted (§3.5).
public struct RegistrationTokenIssue: Sendable, Equatable {
    /// The token, as the Result carries it.
    public let token: String
    /// Wall-clock ms.
    public let expiresAt: UInt64
    /// Whether the relay runs in attestation mode: then only a ticket-admitted phone's token is
    /// written.
    public let attestationRequired: Bool

    /// A token `token` expiring at `expiresAt` (wall-clock ms).
    public init(token: String, expiresAt: UInt64, attestationRequired: Bool) {
        self.token = token
        self.expiresAt = expiresAt
        self.attestationRequired = attestationRequired
    }

    /// Whether the token is stored: only in a pairing room, and only when the phone's credential
    /// holds there (a consumed ticket in attestation mode, anything in open mode — the tests the
    /// machine then applies with their refusals). An established room's phone is minted a token
    /// too (§3.2), but `/register` answers `already registered` before it reads one, so it is
    /// never written: a useless secret at rest, and a write per reconnect, spared.
    func isWritten(after read: AdmissionRead) -> Bool {
        read.state.verifier == nil && (!attestationRequired || read.ticket != nil)
    }

    /// A ticket-admitted phone's token carries its App Attest key, for `/register`.
    func record(after read: AdmissionRead) -> RegistrationTokenRecord {
        RegistrationTokenRecord(expiresAt: expiresAt, attestKeyID: read.ticket?.keyID, attestPublicKey: read.ticket?.publicKey)
    }
}

/// What the lane answers a Proof's `AdmissionLoad` with.
public struct AdmissionAnswer: Sendable, Equatable {
    /// What the store held for the query.
    public var read: AdmissionRead
    /// Whether the stored verifier signed the join (false with no verifier or no signature).
    public var joinVerified: Bool
    /// Whether the load's registration token was written (false when none was asked for, the
    /// room is established, or the credential did not hold).
    public var tokenStored: Bool

    /// An answer carrying `read`, and whether the join verified and the token was written.
    public init(read: AdmissionRead, joinVerified: Bool = false, tokenStored: Bool = false) {
        self.read = read
        self.joinVerified = joinVerified
        self.tokenStored = tokenStored
    }
}
