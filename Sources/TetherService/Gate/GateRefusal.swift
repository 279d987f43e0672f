public import TetherNet

/// Why the gate turned a request or socket away, and what the client is answered. `reason` is
/// the metric label (relay.md §2.3 spells them `rate_limited`, `ip_cap`, `total_cap`); the
/// response is the service's (status and body are part of its wire protocol, not the gate's).
public struct GateRefusal: Error, Sendable, Equatable {
    public let reason: String
    public let response: HTTPResponse

    public init(reason: String, response: HTTPResponse) {
        self.reason = reason
        self.response = response
    }

    public static let rateLimited = "rate_limited"
    public static let ipCap = "ip_cap"
    public static let totalCap = "total_cap"
}
