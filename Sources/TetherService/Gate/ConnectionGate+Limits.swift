public import TetherNet

extension ConnectionGate {
    /// One per-IP fixed-window rate limit (relay.md §2.5).
    public struct RateLimit: Sendable, Equatable {
        /// Hits allowed per window; 0 turns the limit off.
        public var limit: Int
        public var window: Duration

        public init(limit: Int, window: Duration = .seconds(60)) {
            precondition(limit >= 0 && window > .zero)
            self.limit = limit
            self.window = window
        }

        public static let off = RateLimit(limit: 0)
    }

    /// A named per-IP request limit and the service's answer past it.
    public struct RequestLimit: Sendable, Equatable {
        public var rate: RateLimit
        public var refusal: HTTPResponse

        public init(_ rate: RateLimit, refusal: HTTPResponse = .text(429, "rate limited")) {
            self.rate = rate
            self.refusal = refusal
        }
    }

    /// The three socket checks, whose order each protocol fixes.
    public enum SocketCheck: Sendable, Equatable {
        /// The per-IP admission rate (counts every attempt that reaches it).
        case rate
        case perIP
        case total
    }

    /// A service's limits, with the answers its protocol gives when each is hit.
    public struct Limits: Sendable {
        /// The order the socket checks run in: the relay's (relay.md §2.3) by default; the
        /// signaling server checks capacity first and counts only what reaches the rate check
        /// (signaling.md §13.1).
        public var socketCheckOrder: [SocketCheck] = [.rate, .perIP, .total]
        /// Socket admissions (WebSocket upgrades) per IP. Every admission attempt counts, also
        /// those the caps below then refuse (§2.3).
        public var socketRate = RateLimit.off
        public var socketRateRefusal = HTTPResponse.text(429, "rate limited")
        /// Concurrent sockets one IP may hold.
        public var maxSocketsPerIP = Int.max
        public var perIPRefusal = HTTPResponse.text(429, "too many connections")
        /// Concurrent sockets in all.
        public var maxTotalSockets = Int.max
        public var totalRefusal = HTTPResponse.text(503, "capacity")
        /// Named per-IP request limiters (the relay's `attest`), each with its refusal.
        public var requestLimits: [String: RequestLimit] = [:]
        /// Keys each per-IP limiter holds at most (§2.5: past that, expired windows are swept,
        /// then the oldest evicted): bounds memory under a flood of addresses.
        public var maxTrackedIPs = 50_000

        public init() {}
    }
}
