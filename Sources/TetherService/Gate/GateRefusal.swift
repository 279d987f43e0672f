public import TetherNet

/// Why the gate turned a request or socket away, and what the client is answered. `reason` is
/// the metric label (relay.md §2.3 spells them `rate_limited`, `ip_cap`, `total_cap`); the
/// response is the service's (status and body are part of its wire protocol, not the gate's).
public struct GateRefusal: Error, Sendable, Equatable {
    /// The metric label: one of the constants below, a request limiter's name, or the
    /// service's own (`room_cap`).
    public let reason: String
    /// The answer before any upgrade: status, body and headers are the service's.
    public let response: HTTPResponse

    /// A refusal counted under `reason` and answered with `response`.
    public init(reason: String, response: HTTPResponse) {
        self.reason = reason
        self.response = response
    }

    /// Reasons the gate itself gives.
    public static let rateLimited = "rate_limited"
    /// An IP already holds as many sockets as it may.
    public static let ipCap = "ip_cap"
    /// The service holds as many sockets as it may in all.
    public static let totalCap = "total_cap"
}
