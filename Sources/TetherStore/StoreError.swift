/// A store call that did not happen: a full disk, a lost or timed-out database connection, a
/// statement the database refused. A service answers it honestly — the spec's error for the
/// request (relay: 500 / close 1011 `internal error`), never a success for a write that was not
/// made and never "absent" for a read that was not answered — and goes on serving what needs no
/// storage. `message` is zero-PII: the backend's generic text, never a bound value (no room, token,
/// id or secret), so it can be logged.
public struct StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    /// The store could not be reached (refused, starting up or shutting down, not answering),
    /// as opposed to refusing us (a wrong password or database name, a malformed URL): waiting
    /// may cure it, so a service starting while its database is down waits instead of exiting.
    public let unreachable: Bool

    public init(_ message: String, unreachable: Bool = false) {
        self.message = message
        self.unreachable = unreachable
    }

    public var description: String { message }
}
