import TetherNet

/// The relay's Prometheus counters (relay.md §2.10). Names, order and appearance rules are the
/// reference's, so its dashboard and monitor read a Tether relay unchanged. Nothing here is keyed
/// by room, tag or IP — the exposition is safe to ship off the host.
public final class RelayMetrics: @unchecked Sendable {
    /// Why an upgrade was refused, as the `reason` label spells it.
    public enum Rejection: String, Sendable, CaseIterable {
        case gate, misdirected, rate_limited, ip_cap, total_cap, room_cap
    }

    /// Occupancy computed at scrape time from the resident rooms.
    public struct Occupancy: Sendable, Equatable {
        public var rooms = 0, both = 0, macOnly = 0, phoneOnly = 0, neither = 0
        public init() {}
    }

    /// Socket lifetime bucket bounds, seconds (§2.10); +Inf is implicit.
    static let lifetimeBounds: [Double] = [1, 5, 15, 60, 300, 1800]

    private let lock = NetLock()
    private var quotaExceeded = 0
    private var phoneNoMac = 0
    private var keepaliveTerminated = 0
    private var httpRequests = 0
    private var wsUpgrades = 0
    private var httpErrors = 0
    private var processExceptions = 0
    private var pushErrors = 0
    private var rejected: [Rejection: Int] = [:]
    private var lifetimeCounts = [Int](repeating: 0, count: RelayMetrics.lifetimeBounds.count + 1)
    private var lifetimeSum = 0.0

    public init() {}

    public func httpRequest() { lock.withLock { httpRequests += 1 } }
    public func httpError() { lock.withLock { httpErrors += 1 } }
    /// An internal fault the process survived (§7.1 process protection).
    public func processException() { lock.withLock { processExceptions += 1 } }
    public func upgradeAccepted() { lock.withLock { wsUpgrades += 1 } }
    public func upgradeRejected(_ reason: Rejection) { lock.withLock { rejected[reason, default: 0] += 1 } }
    public func keepaliveTermination() { lock.withLock { keepaliveTerminated += 1 } }

    /// Counts a close the relay sent: quota severances and "mac offline" have their own series.
    public func closed(code: UInt16, reason: String) {
        guard code == 1008 else { return }
        lock.withLock {
            if reason.contains("quota") { quotaExceeded += 1 }
            if reason == "mac offline" { phoneNoMac += 1 }
        }
    }

    /// One observation per accepted socket, when it closes.
    public func socketLifetime(milliseconds: UInt64) {
        let seconds = Double(milliseconds) / 1000
        let bucket = Self.lifetimeBounds.firstIndex { seconds <= $0 } ?? Self.lifetimeBounds.count
        lock.withLock {
            lifetimeCounts[bucket] += 1
            lifetimeSum += seconds
        }
    }

    /// Failed outbound pushes (§2.11).
    public func pushFailed() { lock.withLock { pushErrors += 1 } }

    /// The §2.11 push body: a flat JSON object of the headline counters and the two live gauges.
    public func pushBody(timestamp: UInt64, roomsLive: Int, socketsLive: Int) -> String {
        lock.withLock {
            let fields: [(String, String)] = [
                ("ts", String(timestamp)), ("ws_upgrades_total", String(wsUpgrades)),
                ("ws_upgrades_rejected_total", String(rejected.values.reduce(0, +))),
                ("http_requests_total", String(httpRequests)), ("http_errors_total", String(httpErrors)),
                ("process_exceptions_total", String(processExceptions)), ("quota_exceeded_total", String(quotaExceeded)),
                ("rooms_live", String(roomsLive)), ("sockets_live", String(socketsLive)),
            ]
            return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        }
    }

    /// The Prometheus text exposition (format 0.0.4).
    public func render(occupancy: Occupancy, socketsLive: Int) -> String {
        lock.withLock {
            var out = ""
            func series(_ name: String, _ type: String, _ help: String, _ lines: [String]) {
                out += "# HELP relay_\(name) \(help)\n# TYPE relay_\(name) \(type)\n"
                for line in lines { out += line + "\n" }
            }
            func counter(_ name: String, _ help: String, _ value: Int) { series(name, "counter", help, ["relay_\(name) \(value)"]) }
            func gauge(_ name: String, _ help: String, _ value: Int) { series(name, "gauge", help, ["relay_\(name) \(value)"]) }

            counter("quota_exceeded_total", "Sockets closed because a room quota was exceeded.", quotaExceeded)
            counter("phone_no_mac_total", "Phone sockets closed because no mac was admitted.", phoneNoMac)
            counter("ws_keepalive_terminated_total", "WebSockets terminated for not answering a keepalive ping.", keepaliveTerminated)
            counter("metrics_push_errors_total", "Failed outbound metrics pushes.", pushErrors)
            counter("process_exceptions_total", "Internal faults (storage errors) survived by the process.", processExceptions)
            // These three appear only once they have happened, as the reference's do.
            if httpRequests > 0 { counter("http_requests_total", "HTTP requests that passed the gate.", httpRequests) }
            if wsUpgrades > 0 { counter("ws_upgrades_total", "Accepted WebSocket upgrades.", wsUpgrades) }
            if httpErrors > 0 { counter("http_errors_total", "HTTP requests answered 500.", httpErrors) }
            let reasons = rejected.keys.sorted { $0.rawValue < $1.rawValue }
            if !reasons.isEmpty {
                series("ws_upgrades_rejected_total", "counter", "Refused WebSocket upgrades by reason.",
                       reasons.map { "relay_ws_upgrades_rejected_total{reason=\"\($0.rawValue)\"} \(rejected[$0]!)" })
            }
            gauge("rooms_live", "Resident rooms.", occupancy.rooms)
            gauge("sockets_live", "Open accepted WebSockets.", socketsLive)
            gauge("rooms_both", "Resident rooms with an admitted mac and phone.", occupancy.both)
            gauge("rooms_mac_only", "Resident rooms with only an admitted mac.", occupancy.macOnly)
            gauge("rooms_phone_only", "Resident rooms with only an admitted phone.", occupancy.phoneOnly)
            gauge("rooms_neither", "Resident rooms with no admitted socket.", occupancy.neither)

            var cumulative = 0
            var lines: [String] = []
            for (index, bound) in (Self.lifetimeBounds.map { String(Int($0)) } + ["+Inf"]).enumerated() {
                cumulative += lifetimeCounts[index]
                lines.append("relay_socket_lifetime_seconds_bucket{le=\"\(bound)\"} \(cumulative)")
            }
            lines.append("relay_socket_lifetime_seconds_sum \(lifetimeSum)")
            lines.append("relay_socket_lifetime_seconds_count \(cumulative)")
            series("socket_lifetime_seconds", "histogram", "Lifetime of accepted WebSockets.", lines)
            return out
        }
    }
}
