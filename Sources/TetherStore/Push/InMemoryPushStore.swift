import Synchronization
import TetherSync

/// The in-memory push store: the test double, and `PUSH_DB=:memory:`'s stand-in where no file is
/// wanted. Every store lane shares it; one lock over both profiles keeps each call atomic, so a
/// renewal racing a delete cannot bring the record back.
public final class InMemoryPushStore: PushStore, Sendable {
    private struct Entry<Registration> {
        var registration: Registration
        var expiresAt: UInt64

        func isLive(at now: UInt64) -> Bool { expiresAt > now }
    }

    private struct State {
        var mytty: [String: Entry<MyttyRegistration>] = [:]
        var iterm: [String: Entry<ITermRegistration>] = [:]
        var failure: StoreError?
    }

    private let state = Locked(State())

    public init() {}

    /// Until cleared with nil, every call throws `failure` and changes nothing: the push relay's
    /// tests of a store that cannot write (a full disk) use it to check no success is claimed.
    public func setFailure(_ failure: StoreError?) {
        state.withLock { $0.failure = failure }
    }

    private func withState<R: Sendable>(_ body: (inout State) -> R) throws(StoreError) -> R {
        try state.withLock { (state: inout State) throws(StoreError) -> R in
            if let failure = state.failure { throw failure }
            return body(&state)
        }
    }

    public func probeWrite() throws(StoreError) { try withState { _ in } }

    // MARK: Profile M

    public func putMytty(_ registration: MyttyRegistration, pushID: String, expiresAt: UInt64) throws(StoreError) {
        try withState { $0.mytty[pushID] = Entry(registration: registration, expiresAt: expiresAt) }
    }

    public func mytty(pushID: String, now: UInt64) throws(StoreError) -> MyttyRegistration? {
        try withState { state in state.mytty[pushID].flatMap { $0.isLive(at: now) ? $0.registration : nil } }
    }

    @discardableResult
    public func renewMytty(pushID: String, expiresAt: UInt64, now: UInt64) throws(StoreError) -> Bool {
        try withState { state in
            guard state.mytty[pushID]?.isLive(at: now) == true else { return false }
            state.mytty[pushID]?.expiresAt = expiresAt
            return true
        }
    }

    public func deleteMytty(pushID: String) throws(StoreError) {
        try withState { $0.mytty[pushID] = nil }
    }

    // MARK: Profile I

    public func putITerm(_ registration: ITermRegistration, token: String, expiresAt: UInt64) throws(StoreError) {
        try withState { $0.iterm[token] = Entry(registration: registration, expiresAt: expiresAt) }
    }

    public func iterm(token: String, now: UInt64) throws(StoreError) -> ITermRegistration? {
        try withState { state in state.iterm[token].flatMap { $0.isLive(at: now) ? $0.registration : nil } }
    }

    public func deleteITerm(token: String) throws(StoreError) {
        try withState { $0.iterm[token] = nil }
    }

    // MARK: Housekeeping

    public func pruneExpired(now: UInt64) throws(StoreError) -> Int {
        try withState { state in
            let before = state.mytty.count + state.iterm.count
            state.mytty = state.mytty.filter { $0.value.isLive(at: now) }
            state.iterm = state.iterm.filter { $0.value.isLive(at: now) }
            return before - state.mytty.count - state.iterm.count
        }
    }

    public func deviceCount(now: UInt64) throws(StoreError) -> Int {
        try withState { state in
            state.mytty.values.count { $0.isLive(at: now) } + state.iterm.values.count { $0.isLive(at: now) }
        }
    }
}
