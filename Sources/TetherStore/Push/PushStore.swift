/// Which APNs host a registration's pushes go to (push.md §2.6, §3.6).
public enum PushEnvironment: String, Sendable, Equatable, CaseIterable {
    case production
    case sandbox
}

/// A Profile M registration (push.md §2.2), stored under its random `pushID`: exactly the three
/// values the reference keeps, nothing else (§6).
public struct MyttyRegistration: Sendable, Equatable {
    /// The APNs device token as the phone sent it (32–200 hex characters, either case).
    public var deviceToken: String
    public var environment: PushEnvironment
    /// Standard base64 of the 32 random bytes issued with the registration (the HMAC key).
    public var relaySecret: String

    public init(deviceToken: String, environment: PushEnvironment, relaySecret: String) {
        self.deviceToken = deviceToken
        self.environment = environment
        self.relaySecret = relaySecret
    }
}

/// A Profile I registration (push.md §3.2), stored under its device token.
public struct ITermRegistration: Sendable, Equatable {
    /// 64 lowercase hex characters: SHA-256 of the phone's 32-byte push secret.
    public var secretHash: String
    public var sandbox: Bool
    /// When it was last written (wall clock, milliseconds since 1970).
    public var registeredAt: UInt64

    public init(secretHash: String, sandbox: Bool, registeredAt: UInt64) {
        self.secretHash = secretHash
        self.sandbox = sandbox
        self.registeredAt = registeredAt
    }
}

/// The push relay's registrations, both profiles in separate namespaces (push.md §1). Times are
/// wall-clock milliseconds since 1970 (persisted expiry); a record whose `expiresAt` is at or
/// before `now` reads as absent (§6) and is removed by `pruneExpired`.
///
/// Every call may block (disk, network): the push relay makes them on store lanes, never on an
/// event loop. Each call is atomic on its own; a backend keeps each guarantee below inside one
/// statement or transaction, so concurrent calls from several lanes or processes cannot break it.
/// The contract every backend passes is `PushStoreContract` (TetherStoreContract).
public protocol PushStore: AnyObject, Sendable {
    /// A write that leaves nothing behind: whether the store can write at all. A full disk still
    /// answers reads, so an outage is over only when this succeeds (the services' 1 s probe).
    func probeWrite() throws(StoreError)
    /// The cheapest call that reaches the store: whether it answers at all, within a call's
    /// deadline. A networked store that hangs is noticed by it while no request comes in (the
    /// services' 1 s probe while available); a local one always answers.
    func probeAnswer() throws(StoreError)
    /// One hit on `token`'s push window (a fixed window of `windowMs` from its first hit, on
    /// the store's clock), counted where every node sees it: true while the hits in the window
    /// are at most `limit`. Nil from a store only one node uses, whose node counts in memory.
    func hitSharedPushWindow(token: String, limit: Int, windowMs: UInt64) throws(StoreError) -> Bool?

    // MARK: Profile M (`push:<pushID>`)

    /// Stores a new registration under `pushID`, replacing any record with that id.
    func putMytty(_ registration: MyttyRegistration, pushID: String, expiresAt: UInt64) throws(StoreError)
    /// The live registration, or nil when there is none or it expired at `now`.
    func mytty(pushID: String, now: UInt64) throws(StoreError) -> MyttyRegistration?
    /// After a successful delivery: the registration now lives until `expiresAt` — only if it is
    /// still live at `now` (one deleted or expired meanwhile stays gone). Returns whether it was.
    @discardableResult
    func renewMytty(pushID: String, expiresAt: UInt64, now: UInt64) throws(StoreError) -> Bool
    /// Removes the registration (a permanent APNs failure); absent is not an error.
    func deleteMytty(pushID: String) throws(StoreError)

    // MARK: Profile I (`device:<token>`)

    /// Stores the registration under `token`, replacing any record with that token.
    func putITerm(_ registration: ITermRegistration, token: String, expiresAt: UInt64) throws(StoreError)
    /// The live registration, or nil when there is none or it expired at `now`.
    func iterm(token: String, now: UInt64) throws(StoreError) -> ITermRegistration?
    /// Removes the registration; absent is not an error.
    func deleteITerm(token: String) throws(StoreError)

    // MARK: Housekeeping

    /// Deletes every record of either profile expired at `now`; returns how many went.
    func pruneExpired(now: UInt64) throws(StoreError) -> Int
    /// Live registrations of both profiles at `now` (the `pushrelay_devices` gauge).
    func deviceCount(now: UInt64) throws(StoreError) -> Int
}

extension PushStore {
    public func probeAnswer() throws(StoreError) {}
    public func hitSharedPushWindow(token: String, limit: Int, windowMs: UInt64) throws(StoreError) -> Bool? { nil }
}
