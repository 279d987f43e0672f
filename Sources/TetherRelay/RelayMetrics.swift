public import TetherService
public import TetherSync

/// The relay's Prometheus counters (relay.md §2.10), on the chassis's registry. Names, order and
/// appearance rules are the reference's, so its dashboard and monitor read a Tether relay
/// unchanged (RelayMetricsExpositionTests holds the exposition byte for byte). Nothing here is
/// keyed by room, tag or IP — the exposition is safe to ship off the host.
public final class RelayMetrics: Sendable {
    /// Why an upgrade was refused, as the `reason` label spells it.
    public enum Rejection: String, Sendable, CaseIterable {
        /// The reasons: the room gate (`gate`), a room served by another node (`misdirected`), the
        /// per-IP upgrade rate, the per-IP and total socket caps, and the resident-room cap.
        case gate, misdirected, rate_limited, ip_cap, total_cap, room_cap
    }

    /// Occupancy computed at scrape time from the resident rooms.
    public struct Occupancy: Sendable, Equatable {
        /// Resident rooms, and how many have both roles, only a Mac, only a phone, or neither
        /// admitted.
        public var rooms = 0, both = 0, macOnly = 0, phoneOnly = 0, neither = 0
        /// Sockets by where they are: still being admitted, admitted and waiting for their peer,
        /// spliced to it.
        public var pendingSockets = 0, parkedSockets = 0, splicedSockets = 0
        /// Every figure at 0.
        public init() {}
    }

    /// Socket lifetime bucket bounds, seconds (§2.10); +Inf is implicit.
    static let lifetimeBounds: [Double] = [1, 5, 15, 60, 300, 1800]

    /// Every series below, in the reference's order; a service adds its own after them.
    public let registry: MetricsRegistry
    private let quotaExceeded: Counter
    private let phoneNoMac: Counter
    private let keepaliveTerminated: Counter
    private let pushErrors: Counter
    private let processExceptions: Counter
    private let httpRequests: Counter
    private let wsUpgrades: Counter
    private let httpErrors: Counter
    private let storageErrors: Counter
    private let storageAvailable: Gauge
    private let shardMapVersion: Gauge
    /// One child per reason, made up front so counting a refusal takes no lock.
    private let rejected: [Rejection: Counter]
    /// Sockets and requests passed to the node owning their room (a v1 cluster), by outcome.
    private let forwarded: [Forward: Counter]
    private let roomsLive, socketsLive, roomsBoth, roomsMacOnly, roomsPhoneOnly, roomsNeither: Gauge
    private let socketsPending, socketsParked, socketsSpliced: Gauge
    private let gateOrigin, gateBadRoom: Counter
    /// One child per `closeReasons` entry, made up front (the series exist at 0).
    private let closes: [String: Counter]
    private let lifetime: Histogram
    /// The occupancy gauges are set from a scrape's own figures and rendered with them; two
    /// scrapes at once must not mix their figures.
    private let scrape = Locked(())

    /// A fresh registry with every series of the relay.
    public init() {
        let registry = MetricsRegistry()
        self.registry = registry
        func counter(_ name: String, _ help: String, hiddenAtZero: Bool = false) -> Counter {
            registry.counter("relay_" + name, help: help, hiddenAtZero: hiddenAtZero)
        }
        func gauge(_ name: String, _ help: String) -> Gauge { registry.gauge("relay_" + name, help: help) }
        quotaExceeded = counter("quota_exceeded_total", "Sockets closed because a room quota was exceeded.")
        phoneNoMac = counter("phone_no_mac_total", "Phone sockets closed because no mac was admitted.")
        keepaliveTerminated = counter("ws_keepalive_terminated_total", "WebSockets terminated for not answering a keepalive ping.")
        pushErrors = counter("metrics_push_errors_total", "Failed outbound metrics pushes.")
        processExceptions = counter("process_exceptions_total", "Internal faults survived by the process (a failing store is counted in relay_storage_errors_total instead).")
        // These three appear only once they have happened, as the reference's do.
        httpRequests = counter("http_requests_total", "HTTP requests that passed the gate.", hiddenAtZero: true)
        wsUpgrades = counter("ws_upgrades_total", "Accepted WebSocket upgrades.", hiddenAtZero: true)
        httpErrors = counter("http_errors_total", "HTTP requests answered 500.", hiddenAtZero: true)
        let reasons = registry.counter("relay_ws_upgrades_rejected_total", help: "Refused WebSocket upgrades by reason.",
                                       labels: ["reason"], hiddenAtZero: true)
        rejected = Dictionary(uniqueKeysWithValues: Rejection.allCases.map { ($0, reasons.labels($0.rawValue)) })
        roomsLive = gauge("rooms_live", "Resident rooms.")
        socketsLive = gauge("sockets_live", "Open accepted WebSockets.")
        roomsBoth = gauge("rooms_both", "Resident rooms with an admitted mac and phone.")
        roomsMacOnly = gauge("rooms_mac_only", "Resident rooms with only an admitted mac.")
        roomsPhoneOnly = gauge("rooms_phone_only", "Resident rooms with only an admitted phone.")
        roomsNeither = gauge("rooms_neither", "Resident rooms with no admitted socket.")
        lifetime = registry.histogram("relay_socket_lifetime_seconds", help: "Lifetime of accepted WebSockets.", buckets: Self.lifetimeBounds)
        // Tether's own, after the reference's series so the dashboard's parse is unchanged.
        storageErrors = counter("storage_errors_total", "Store calls that failed (database down, disk full); each refused what needed it.")
        storageAvailable = gauge("storage_available", "1 while the store answers, 0 from a failed call until one succeeds.")
        storageAvailable.set(1)
        shardMapVersion = gauge("shard_map_version", "Version of the shard map this node serves (0: none published, it owns every bucket).")
        let byState = registry.gauge("relay_sockets_by_state", help: "Open accepted WebSockets by state: pending (not yet admitted), parked (admitted, peer absent), spliced (admitted with its peer).",
                                     labels: ["state"])
        (socketsPending, socketsParked, socketsSpliced) = (byState.labels("pending"), byState.labels("parked"), byState.labels("spliced"))
        // The reference counts both under reason="gate"; an operator needs to tell a client
        // sending an Origin (a browser: 403) from a malformed room header (400).
        let gateCauses = registry.counter("relay_room_gate_refused_total",
                                          help: "Upgrades the room gate refused (counted in reason=\"gate\" too), by cause: origin (403, an Origin header) or bad_room (400).",
                                          labels: ["cause"])
        (gateOrigin, gateBadRoom) = (gateCauses.labels("origin"), gateCauses.labels("bad_room"))
        let closeFamily = registry.counter("relay_sockets_closed_total",
                                           help: "Accepted WebSockets closed, by reason: the relay's own close reason (peer_gone, displaced, write_stalled, mac_offline, reshard, ...), or client_closed, connection_lost, keepalive_timeout, protocol_error.",
                                           labels: ["reason"])
        closes = Dictionary(uniqueKeysWithValues: Self.closeReasons.map { ($0, closeFamily.labels($0)) })
        let forwards = registry.counter("relay_forwarded_total", help: "Sockets and requests passed to the node owning their room (RELAY_NODE_URL), by outcome.",
                                        labels: ["kind", "outcome"], hiddenAtZero: true)
        forwarded = Dictionary(uniqueKeysWithValues: Forward.allCases.map { ($0, forwards.labels($0.kind, $0.outcome)) })
    }

    /// A socket or request passed on, or not: the owner could not be reached in time.
    public enum Forward: CaseIterable, Sendable {
        /// A socket or an HTTP request passed to its owner, or not passed because the owner did not
        /// answer in time.
        case socket, request, socketUnreachable, requestUnreachable
        var kind: String { self == .socket || self == .socketUnreachable ? "socket" : "request" }
        var outcome: String { self == .socket || self == .request ? "passed" : "owner_unreachable" }
    }

    /// Counts a socket or request passed on (or not) to the room's owner.
    public func forward(_ outcome: Forward) { forwarded[outcome]!.increment() }

    /// Counts an HTTP request that passed the gate.
    public func httpRequest() { httpRequests.increment() }
    /// Counts an HTTP request answered 500.
    public func httpError() { httpErrors.increment() }
    /// Counts a failed store call, and shows storage unavailable until one is answered.
    public func storageFailed() {
        storageErrors.increment()
        storageAvailable.set(0)
    }
    /// Shows storage available again.
    public func storageAnswered() { storageAvailable.set(1) }
    /// Records the version of the shard map now in use.
    public func shardMapAdopted(version: Int) { shardMapVersion.set(Int64(version)) }
    /// An internal fault the process survived (§7.1 process protection).
    public func processException() { processExceptions.increment() }
    /// Counts an accepted WebSocket upgrade.
    public func upgradeAccepted() { wsUpgrades.increment() }
    /// Counts a refused WebSocket upgrade under `reason`.
    public func upgradeRejected(_ reason: Rejection) { rejected[reason]!.increment() }
    /// A room-gate refusal's cause, by the status it answered (403: an Origin, 400: the room).
    public func gateRefused(status: Int) {
        if status == 403 { gateOrigin.increment() } else if status == 400 { gateBadRoom.increment() }
    }
    /// Counts a WebSocket closed for not answering a keepalive ping.
    public func keepaliveTermination() { keepaliveTerminated.increment() }

    /// Counts a close the relay sent: quota severances and "mac offline" have their own series.
    public func closed(code: UInt16, reason: String) {
        guard code == 1008 else { return }
        if reason.contains("quota") { quotaExceeded.increment() }
        if reason == "mac offline" { phoneNoMac.increment() }
    }

    /// The `reason` label values of `relay_sockets_closed_total`: the close reasons RoomMachine and
    /// the server send (spaces as underscores; `reshard <owner>` is `reshard`), then the ends the
    /// relay did not choose. A fixed set, so a client's text can never become a series.
    public static let closeReasons: [String] = [
        "peer_gone", "displaced", "write_stalled", "admission_timeout", "too_many_pending", "frame_too_large",
        "frame_rate_exceeded", "daily_quota_exceeded", "pairing_cycle_cap", "bad_hello", "bad_proof", "rate_limited",
        "signature_required", "bad_signature", "ticket_required", "bad_ticket", "mac_offline", "slot_occupied",
        "internal_error", "room_deleted", "reshard", "server_shutting_down",
        "client_closed", "connection_lost", "keepalive_timeout", "protocol_error", "other",
    ]

    /// How an accepted socket ended, for `relay_sockets_closed_total`.
    public enum SocketEnd: Sendable {
        /// The relay closed it with this reason.
        case relay(reason: String)
        /// The ends the relay did not choose: the client closed it, the connection was lost, a
        /// keepalive ping went unanswered, or the client broke the WebSocket protocol.
        case client, connectionLost, keepaliveTimeout, protocolError

        var label: String {
            switch self {
            case let .relay(reason):
                if reason == "reshard" || reason.hasPrefix("reshard ") { return "reshard" }
                let label = String(reason.map { $0 == " " ? "_" : $0 })
                return RelayMetrics.closeReasons.contains(label) ? label : "other"
            case .client: return "client_closed"
            case .connectionLost: return "connection_lost"
            case .keepaliveTimeout: return "keepalive_timeout"
            case .protocolError: return "protocol_error"
            }
        }
    }

    /// Once per accepted socket, when it is gone.
    public func socketEnded(_ end: SocketEnd) { closes[end.label]!.increment() }

    /// One observation per accepted socket, when it closes.
    public func socketLifetime(_ lived: Duration) { lifetime.observe(lived.secondsDouble) }

    /// Failed outbound pushes (§2.11).
    public func pushFailed() { pushErrors.increment() }

    /// The §2.11 push body: a flat JSON object of the headline counters and the two live gauges.
    public func pushBody(timestamp: WallInstant, roomsLive: Int, socketsLive: Int) -> String {
        let fields: [(String, String)] = [
            ("ts", String(timestamp.unixMilliseconds)), ("ws_upgrades_total", String(wsUpgrades.value)),
            ("ws_upgrades_rejected_total", String(rejected.values.reduce(0) { $0 + $1.value })),
            ("http_requests_total", String(httpRequests.value)), ("http_errors_total", String(httpErrors.value)),
            ("process_exceptions_total", String(processExceptions.value)), ("quota_exceeded_total", String(quotaExceeded.value)),
            ("rooms_live", String(roomsLive)), ("sockets_live", String(socketsLive)),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// The Prometheus text exposition (format 0.0.4), with the occupancy of this scrape.
    public func render(occupancy: Occupancy, socketsLive sockets: Int) -> String {
        scrape.withLock { _ in
            roomsLive.set(Int64(occupancy.rooms))
            socketsLive.set(Int64(sockets))
            roomsBoth.set(Int64(occupancy.both))
            roomsMacOnly.set(Int64(occupancy.macOnly))
            roomsPhoneOnly.set(Int64(occupancy.phoneOnly))
            roomsNeither.set(Int64(occupancy.neither))
            socketsPending.set(Int64(occupancy.pendingSockets))
            socketsParked.set(Int64(occupancy.parkedSockets))
            socketsSpliced.set(Int64(occupancy.splicedSockets))
            return registry.render()
        }
    }
}
