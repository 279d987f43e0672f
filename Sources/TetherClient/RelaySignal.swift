/// What a relay close or HTTP status tells a client to do (client.md §14, "Close and status
/// classification"; relay.md §8.4 for re-resolve signals).
public enum RelaySignal: Sendable, Equatable {
    /// The room's bucket lives on another node: refetch the shard map, reconnect to the owner
    /// (the only signal that leaves the current host). The owner is a diagnostic hint.
    case reResolve(owner: String?)
    /// The room's daily byte quota is spent: wait 30 minutes.
    case quotaExceeded
    /// A newer same-role socket took the slot: wait 60 seconds.
    case displaced
    /// Anything else that may pass: retry the same host with the reconnect backoff.
    case transient
    /// An HTTP refusal that retrying will not fix: surface it.
    case fatal

    /// How long the long-backoff classes wait before the next attempt.
    public var fixedDelay: Duration? {
        switch self {
        case .quotaExceeded: .seconds(30 * 60)
        case .displaced: .seconds(60)
        default: nil
        }
    }

    /// A WebSocket close from the relay.
    public static func close(code: UInt16, reason: String) -> RelaySignal {
        if code == 4421 || reason == "reshard" || reason.hasPrefix("reshard ") {
            return .reResolve(owner: reason.hasPrefix("reshard ") ? String(reason.dropFirst("reshard ".count)) : nil)
        }
        if code == 1008, reason.contains("daily quota") { return .quotaExceeded }
        if code == 1000, reason.contains("displaced") { return .displaced }
        return .transient
    }

    /// An HTTP answer to a room-scoped call that was not a success.
    public static func http(status: Int, owner: String? = nil) -> RelaySignal {
        switch status {
        case 421: .reResolve(owner: owner)
        case 429, 500...599: .transient
        default: .fatal
        }
    }
}
