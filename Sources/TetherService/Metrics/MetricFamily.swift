import TetherSync

/// Every series of one metric name: one child per set of label values (`reason="gate"`),
/// created on first use. Keep the child a hot path increments (`family.labels("gate")` once,
/// then `increment()`): looking one up takes a lock.
public final class MetricFamily<Metric: ExposedMetric>: Sendable {
    /// The metric's name (`relay_upgrades_rejected_total`).
    public let name: String
    /// The `# HELP` text.
    public let help: String
    /// The label names each child gives values for, in order.
    public let labelNames: [String]
    /// Children whose value is 0 are left out (the family too, if none is left): for series
    /// that appear only once something has happened, as the reference relay's do.
    public let hiddenAtZero: Bool
    let type: String
    private let make: @Sendable () -> Metric
    private let children = Locked<[[String]: Metric]>([:])

    init(name: String, help: String, labelNames: [String], hiddenAtZero: Bool, type: String = Metric.prometheusType,
         make: @escaping @Sendable () -> Metric) {
        precondition(Prometheus.isValidMetricName(name), "invalid metric name \(name)")
        precondition(labelNames.allSatisfy(Prometheus.isValidLabelName) && Set(labelNames).count == labelNames.count,
                     "invalid label names \(labelNames) for \(name)")
        precondition(!labelNames.contains("le") || Metric.self != Histogram.self, "le is a histogram's own label")
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.hiddenAtZero = hiddenAtZero
        self.type = type
        self.make = make
    }

    /// The child for these label values (in `labelNames` order), created at its first use.
    public func labels(_ values: String...) -> Metric { labels(values) }

    /// The child for these label values (in `labelNames` order), created at its first use.
    public func labels(_ values: [String]) -> Metric {
        precondition(values.count == labelNames.count, "\(name) takes \(labelNames.count) label values")
        return children.withLock { children in
            if let child = children[values] { return child }
            let child = make()
            children[values] = child
            return child
        }
    }

    /// Puts `child` at these label values (a callback read at scrape time), replacing any.
    func set(_ child: Metric, for values: [String]) {
        precondition(values.count == labelNames.count, "\(name) takes \(labelNames.count) label values")
        children.withLock { $0[values] = child }
    }

    /// The family's lines, children sorted by label values; empty when nothing is visible.
    func exposition() -> String {
        // Snapshot under the lock, read values outside it: a callback never runs under our lock.
        let snapshot = children.withLock { $0.sorted { $0.key.lexicographicallyPrecedes($1.key) } }
        var lines: [String] = []
        for (values, child) in snapshot {
            let labels = PrometheusLabels(zip(labelNames, values).map { (name: $0, value: $1) })
            lines += child.exposition(name: name, labels: labels, hiddenAtZero: hiddenAtZero) ?? []
        }
        guard !lines.isEmpty else { return "" }
        return "# HELP \(name) \(Prometheus.escapeHelp(help))\n# TYPE \(name) \(type)\n" + lines.joined(separator: "\n") + "\n"
    }
}

/// What the registry keeps, whatever the family's metric kind.
protocol RenderedFamily: Sendable {
    var name: String { get }
    var help: String { get }
    var labelNames: [String] { get }
    var type: String { get }
    func exposition() -> String
}

extension MetricFamily: RenderedFamily {}
