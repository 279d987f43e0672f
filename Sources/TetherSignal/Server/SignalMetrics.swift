public import TetherService
import TetherWire

/// The signaling server's metrics (signaling.md §6.5): aggregate counters and gauges only — no
/// ID, IP or call UUID ever becomes a label.
public final class SignalMetrics: Sendable {
    /// The registry every series is in (`/metrics` on the admin listener).
    public let registry = MetricsRegistry()
    let upgrades: Counter
    let upgradesRefused: MetricFamily<Counter>
    let registrations: Counter
    let signals: MetricFamily<Counter>
    let errors: MetricFamily<Counter>
    let presenceQueries: Counter
    let issuances: MetricFamily<Counter>
    let issuanceLatency: Histogram
    /// `signals`' children for every kind and outcome, looked up once: every signal read is
    /// counted, and a family lookup takes a lock and hashes the label strings.
    private let signalCounters: [Counter]

    init() {
        upgrades = registry.counter("signal_upgrades_total", help: "WebSocket upgrades accepted.")
        upgradesRefused = registry.counter("signal_upgrades_refused_total", help: "Upgrade requests refused, by reason.", labels: ["reason"])
        registrations = registry.counter("signal_registrations_total", help: "Registrations completed (the ID became routable).")
        signals = registry.counter("signal_signals_total", help: "Signals by kind and outcome.", labels: ["kind", "outcome"])
        errors = registry.counter("signal_errors_total", help: "Error messages sent, by code.", labels: ["code"])
        presenceQueries = registry.counter("signal_presence_queries_total", help: "Presence queries answered.")
        issuances = registry.counter("signal_issuances_total", help: "TURN credential issuances by result.", labels: ["result"])
        issuanceLatency = registry.histogram("signal_issuance_latency_seconds", help: "TURN credential issuance time.",
                                             buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 8])
        // Every label value known in advance is exposed from the start, at 0: a rate over a
        // series that appears only with its first event reads as no data, not as none.
        for reason in Self.refusalReasons { _ = upgradesRefused.labels(reason) }
        let signals = signals
        signalCounters = SignalKind.allCases.flatMap { kind in SignalOutcome.allCases.map { signals.labels(kind.rawValue, $0.rawValue) } }
        for code in SignalingErrorCode.allCases { _ = errors.labels(code.rawValue) }
        for result in ["issued"] + IssuanceFailure.Reason.allCases.map(\.rawValue) { _ = issuances.labels(result) }
    }

    /// `signal_upgrades_refused_total`'s reasons: the upgrade's own checks and the gate's.
    static let refusalReasons = ["draining", "handshake", "ip_cap", "origin", "path", "query", "rate_limited", "total_cap"]

    func register(sockets: @escaping @Sendable () -> Int, routable: @escaping @Sendable () -> Int,
                  issuing: @escaping @Sendable () -> Int, droppedLogLines: @escaping @Sendable () -> Int) {
        registry.registerBuildInfo(service: "signal")
        registry.registerProcessMetrics()
        registry.gauge("signal_sockets", help: "Open WebSocket connections.") { Int64(sockets()) }
        registry.gauge("signal_routable_ids", help: "IDs registered and routable now.") { Int64(routable()) }
        registry.gauge("signal_issuances_in_flight", help: "TURN credential issuances in flight.") { Int64(issuing()) }
        registry.counter("signal_log_lines_dropped_total", help: "Log lines dropped because standard error was too slow.") {
            UInt64(droppedLogLines())
        }
    }

    func signal(_ kind: SignalKind?, _ outcome: SignalOutcome) {
        guard let kind, let k = SignalKind.allCases.firstIndex(of: kind), let o = SignalOutcome.allCases.firstIndex(of: outcome) else {
            return signals.labels("invalid", outcome.rawValue).increment()
        }
        signalCounters[k * SignalOutcome.allCases.count + o].increment()
    }
}
