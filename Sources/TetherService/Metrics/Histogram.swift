import Synchronization

/// Observations counted into fixed buckets (upper bounds, inclusive), with their sum: what a
/// latency or lifetime distribution needs, in constant memory. An observation is two relaxed
/// atomic updates; a scrape that races one may see its count before its sum (Prometheus
/// tolerates that; a lock on every observation would cost every socket close).
public final class Histogram: ExposedMetric {
    public static let prometheusType = "histogram"
    /// Upper bounds, ascending; `+Inf` is implicit.
    public let bounds: [Double]
    /// Per bucket, not cumulative; the last is `+Inf`.
    private let counts: [Counter]
    /// The sum's bit pattern (there is no atomic Double).
    private let sumBits = Atomic<UInt64>(0.0.bitPattern)

    /// A histogram over `bounds`: finite upper bounds, strictly ascending (`+Inf` is added).
    public init(bounds: [Double]) {
        precondition(!bounds.isEmpty && zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 } && bounds.allSatisfy(\.isFinite),
                     "histogram bounds ascend and are finite (+Inf is implicit)")
        self.bounds = bounds
        counts = (0...bounds.count).map { _ in Counter() }
    }

    /// Counts `value` in the first bucket whose bound is at least `value`, and adds it to the sum.
    public func observe(_ value: Double) {
        let bucket = bounds.firstIndex { value <= $0 } ?? bounds.count
        counts[bucket].increment()
        var old = sumBits.load(ordering: .relaxed)
        while true {
            let (exchanged, original) = sumBits.compareExchange(expected: old, desired: (Double(bitPattern: old) + value).bitPattern,
                                                                ordering: .relaxed)
            if exchanged { return }
            old = original
        }
    }

    /// How many values were observed.
    public var count: UInt64 { counts.reduce(0) { $0 + $1.value } }
    /// The sum of every value observed.
    public var sum: Double { Double(bitPattern: sumBits.load(ordering: .relaxed)) }

    public func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]? {
        let perBucket = counts.map(\.value)
        let total = perBucket.reduce(0, +)
        if hiddenAtZero, total == 0 { return nil }
        var lines: [String] = []
        var cumulative: UInt64 = 0
        for (index, count) in perBucket.enumerated() {
            cumulative += count
            let bound = index < bounds.count ? Prometheus.formatBound(bounds[index]) : "+Inf"
            lines.append("\(name)_bucket\(labels.rendered(adding: ("le", bound))) \(cumulative)")
        }
        lines.append("\(name)_sum\(labels.rendered()) \(Prometheus.format(sum))")
        lines.append("\(name)_count\(labels.rendered()) \(cumulative)")
        return lines
    }
}
