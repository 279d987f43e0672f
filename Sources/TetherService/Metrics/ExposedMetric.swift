/// Something a `MetricsRegistry` can expose: counters, gauges, histograms, or a service's own
/// kind. Each instance is one child of a family (one set of label values).
public protocol ExposedMetric: Sendable {
    /// The `# TYPE` word: `counter`, `gauge`, `histogram`, `untyped`.
    static var prometheusType: String { get }
    /// The sample lines for this child (no trailing newlines), read at scrape time; nil to show
    /// nothing, e.g. a series hidden until it first counts something.
    func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]?
}

/// A child's label pairs, rendered as the text format wants them.
public struct PrometheusLabels: Sendable, Equatable {
    /// The label names and values, in the order they are rendered.
    public let pairs: [(name: String, value: String)]

    /// Labels rendered in the order given.
    public init(_ pairs: [(name: String, value: String)]) { self.pairs = pairs }

    public static func == (a: PrometheusLabels, b: PrometheusLabels) -> Bool {
        a.pairs.count == b.pairs.count && zip(a.pairs, b.pairs).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    /// `{a="1",b="x"}`, or nothing without labels; `extra` (a histogram's `le`) comes last.
    public func rendered(adding extra: (name: String, value: String)? = nil) -> String {
        let all = pairs + (extra.map { [$0] } ?? [])
        guard !all.isEmpty else { return "" }
        return "{" + all.map { "\($0.name)=\"\(Prometheus.escapeLabelValue($0.value))\"" }.joined(separator: ",") + "}"
    }
}
