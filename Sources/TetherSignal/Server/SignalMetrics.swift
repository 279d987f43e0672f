public import TetherService
import TetherWire

/// The signaling server's metrics (signaling.md §6.5): aggregate counters and gauges only — no
/// ID, IP or call UUID ever becomes a label.
public final class SignalMetrics: Sendable {
    public let registry = MetricsRegistry()
    let upgrades: Counter
    let upgradesRefused: MetricFamily<Counter>
    let registrations: Counter
    let signals: MetricFamily<Counter>
    let errors: MetricFamily<Counter>
    let presenceQueries: Counter
    let issuances: MetricFamily<Counter>
    let issuanceLatency: Histogram

    init() {
        upgrades = registry.counter("signal_upgrades_total", help: "WebSocket upgrades accepted")
        upgradesRefused = registry.counter("signal_upgrades_refused_total", help: "upgrade requests refused, by reason", labels: ["reason"])
        registrations = registry.counter("signal_registrations_total", help: "registrations completed (the ID became routable)")
        signals = registry.counter("signal_signals_total", help: "signals by kind and outcome", labels: ["kind", "outcome"])
        errors = registry.counter("signal_errors_total", help: "error messages sent, by code", labels: ["code"])
        presenceQueries = registry.counter("signal_presence_queries_total", help: "presence queries answered")
        issuances = registry.counter("signal_issuances_total", help: "TURN credential issuances by result", labels: ["result"])
        issuanceLatency = registry.histogram("signal_issuance_latency_seconds", help: "TURN credential issuance time",
                                             buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 8])
    }

    func register(sockets: @escaping @Sendable () -> Int, routable: @escaping @Sendable () -> Int,
                  issuing: @escaping @Sendable () -> Int, droppedLogLines: @escaping @Sendable () -> Int) {
        registry.registerBuildInfo(service: "signal")
        registry.registerProcessMetrics()
        registry.gauge("signal_sockets", help: "open WebSocket connections") { Int64(sockets()) }
        registry.gauge("signal_routable_ids", help: "IDs registered and routable now") { Int64(routable()) }
        registry.gauge("signal_issuances_in_flight", help: "TURN credential issuances in flight") { Int64(issuing()) }
        registry.counter("signal_log_lines_dropped_total", help: "log lines dropped because standard error was too slow") {
            UInt64(droppedLogLines())
        }
    }

    func signal(_ kind: SignalKind?, _ outcome: String) { signals.labels(kind?.rawValue ?? "invalid", outcome).increment() }
}
