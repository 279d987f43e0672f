import Synchronization
import TetherSync

/// A service's metrics, exposed in the Prometheus text format 0.0.4 in registration order (a
/// dashboard written against one order keeps reading it). Counters, gauges and histograms are
/// atomics, so loops update them without a lock; callback metrics are read at scrape time.
///
/// ```swift
/// let metrics = MetricsRegistry()
/// let upgrades = metrics.counter("relay_ws_upgrades_total", help: "Accepted WebSocket upgrades.")
/// let rejected = metrics.counter("relay_ws_upgrades_rejected_total", help: "Refused upgrades by reason.", labels: ["reason"])
/// metrics.counter("relay_log_lines_dropped_total", help: "…") { UInt64(log.droppedLines) }
/// upgrades.increment(); rejected.labels("gate").increment()
/// ```
public final class MetricsRegistry: Sendable {
    private let families = Locked<[any RenderedFamily]>([])

    /// An empty registry.
    public init() {}

    /// Registers a counter without labels and returns it. `hiddenAtZero` leaves it out of the
    /// exposition until it first counts.
    @discardableResult
    public func counter(_ name: String, help: String, hiddenAtZero: Bool = false) -> Counter {
        single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero) { Counter() })
    }

    /// Registers a counter with `labels`; take each child with
    /// ``MetricFamily/labels(_:)-(String...)``.
    public func counter(_ name: String, help: String, labels: [String], hiddenAtZero: Bool = false) -> MetricFamily<Counter> {
        register(MetricFamily(name: name, help: help, labelNames: labels, hiddenAtZero: hiddenAtZero) { Counter() })
    }

    /// A counter kept by someone else (the log sink's drops), read at each scrape.
    public func counter(_ name: String, help: String, hiddenAtZero: Bool = false, read: @escaping @Sendable () -> UInt64) {
        _ = single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero, type: Counter.prometheusType) {
            CallbackMetric(reading: .unsigned(read))
        })
    }

    /// A fractional counter kept by someone else (CPU seconds), read at each scrape. Named apart
    /// from `counter` so a trailing closure returning a literal never picks it by accident.
    public func secondsCounter(_ name: String, help: String, read: @escaping @Sendable () -> Double) {
        _ = single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: false, type: Counter.prometheusType) {
            CallbackMetric(reading: .double(read))
        })
    }

    /// A counter with one label whose every value is known in advance, each kept by someone else
    /// and read at each scrape: every series is exposed from the start, at 0 until it counts.
    public func counter(_ name: String, help: String, label: String, readings: [(value: String, read: @Sendable () -> UInt64)]) {
        let family = register(MetricFamily(name: name, help: help, labelNames: [label], hiddenAtZero: false, type: Counter.prometheusType) {
            CallbackMetric(reading: .unsigned { 0 })
        })
        for (value, read) in readings { family.set(CallbackMetric(reading: .unsigned(read)), for: [value]) }
    }

    /// Registers a gauge without labels and returns it. `hiddenAtZero` leaves it out of the
    /// exposition while it is 0.
    @discardableResult
    public func gauge(_ name: String, help: String, hiddenAtZero: Bool = false) -> Gauge {
        single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero) { Gauge() })
    }

    /// Registers a gauge with `labels`; take each child with
    /// ``MetricFamily/labels(_:)-(String...)``.
    public func gauge(_ name: String, help: String, labels: [String], hiddenAtZero: Bool = false) -> MetricFamily<Gauge> {
        register(MetricFamily(name: name, help: help, labelNames: labels, hiddenAtZero: hiddenAtZero) { Gauge() })
    }

    /// A gauge computed at each scrape (a table's size): `read` runs on the scraping thread,
    /// outside every registry lock.
    public func gauge(_ name: String, help: String, hiddenAtZero: Bool = false, read: @escaping @Sendable () -> Int64) {
        _ = single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero, type: Gauge.prometheusType) {
            CallbackMetric(reading: .integer(read))
        })
    }

    /// A fractional gauge computed at each scrape (a ratio, seconds).
    public func gauge(_ name: String, help: String, hiddenAtZero: Bool = false, readDouble: @escaping @Sendable () -> Double) {
        _ = single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero, type: Gauge.prometheusType) {
            CallbackMetric(reading: .double(readDouble))
        })
    }

    /// Registers a histogram without labels and returns it.
    ///
    /// - Parameters:
    ///   - name: the metric's name.
    ///   - help: the `# HELP` text.
    ///   - buckets: upper bounds, ascending (`+Inf` is added).
    ///   - hiddenAtZero: leave it out of the exposition until it first observes a value.
    @discardableResult
    public func histogram(_ name: String, help: String, buckets: [Double], hiddenAtZero: Bool = false) -> Histogram {
        single(MetricFamily(name: name, help: help, labelNames: [], hiddenAtZero: hiddenAtZero) { Histogram(bounds: buckets) })
    }

    /// Registers a histogram with `labels`, every child over the same `buckets`.
    public func histogram(_ name: String, help: String, labels: [String], buckets: [Double], hiddenAtZero: Bool = false) -> MetricFamily<Histogram> {
        register(MetricFamily(name: name, help: help, labelNames: labels, hiddenAtZero: hiddenAtZero) { Histogram(bounds: buckets) })
    }

    /// The exposition: every family in registration order, each with `# HELP` and `# TYPE`.
    public func render() -> String {
        families.withLock { $0 }.map { $0.exposition() }.joined()
    }

    /// Every family as a Markdown table (name, type, labels, meaning), in registration order:
    /// the operator's reference, generated so it cannot drift from what `/metrics` exposes.
    public func markdownReference() -> String {
        var text = "| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n"
        for family in families.withLock({ $0 }) {
            let labels = family.labelNames.isEmpty ? "" : family.labelNames.map { "`\($0)`" }.joined(separator: ", ")
            text += "| `\(family.name)` | \(family.type) | \(labels) | \(family.help.replacingOccurrences(of: "|", with: "\\|")) |\n"
        }
        return text
    }

    private func single<Metric>(_ family: MetricFamily<Metric>) -> Metric { register(family).labels([]) }

    private func register<Metric>(_ family: MetricFamily<Metric>) -> MetricFamily<Metric> {
        families.withLock { families in
            // Two families of one name would expose two # TYPE lines, which scrapers reject.
            precondition(!families.contains { $0.name == family.name }, "metric \(family.name) registered twice")
            families.append(family)
        }
        return family
    }
}
