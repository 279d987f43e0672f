public import TetherNet

extension ConnectionGate {
    /// One per-IP fixed-window rate limit (relay.md §2.5).
    public struct RateLimit: Sendable, Equatable {
        /// Hits allowed per window; 0 turns the limit off.
        public var limit: Int
        /// The window's length (60 s unless a protocol says otherwise).
        public var window: Duration

        /// `limit` hits per `window` per IP; `limit` 0 turns it off.
        public init(limit: Int, window: Duration = .seconds(60)) {
            precondition(limit >= 0 && window > .zero)
            self.limit = limit
            self.window = window
        }

        /// No limit at all.
        public static let off = RateLimit(limit: 0)
    }

    /// A named per-IP request limit and the service's answer past it.
    public struct RequestLimit: Sendable, Equatable {
        /// How many requests one IP may make per window.
        public var rate: RateLimit
        /// The answer to a request past the limit.
        public var refusal: HTTPResponse

        /// A limit of `rate`, answered with `refusal` (429 `rate limited` by default) past it.
        public init(_ rate: RateLimit, refusal: HTTPResponse = .text(429, "rate limited")) {
            self.rate = rate
            self.refusal = refusal
        }
    }

    /// The three socket checks, whose order each protocol fixes.
    public enum SocketCheck: Sendable, Equatable {
        /// The per-IP admission rate (counts every attempt that reaches it).
        case rate
        /// The per-IP socket cap (``Limits/maxSocketsPerIP``).
        case perIP
        /// The cap on all sockets (``Limits/maxTotalSockets``).
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
        /// The answer to an upgrade past ``socketRate``.
        public var socketRateRefusal = HTTPResponse.text(429, "rate limited")
        /// Concurrent sockets one IP may hold.
        public var maxSocketsPerIP = Int.max
        /// The answer to an upgrade past ``maxSocketsPerIP``.
        public var perIPRefusal = HTTPResponse.text(429, "too many connections")
        /// Concurrent sockets in all.
        public var maxTotalSockets = Int.max
        /// The answer to an upgrade past ``maxTotalSockets``.
        public var totalRefusal = HTTPResponse.text(503, "capacity")
        /// Named per-IP request limiters (the relay's `attest`), each with its refusal.
        public var requestLimits: [String: RequestLimit] = [:]
        /// Keys each per-IP limiter holds at most (§2.5: past that, expired windows are swept,
        /// then the oldest evicted): bounds memory under a flood of addresses.
        public var maxTrackedIPs = 50_000

        /// No limits: every rate off, every cap at `Int.max`; a service sets what its protocol
        /// asks.
        public init() {}
    }
}
