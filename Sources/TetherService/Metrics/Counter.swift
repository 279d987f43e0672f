import Synchronization

/// A monotonically increasing count. Incrementing is one relaxed atomic add: no lock, safe from
/// every loop at once.
public final class Counter: ExposedMetric {
    public static let prometheusType = "counter"
    private let count = Atomic<UInt64>(0)

    /// A counter at 0.
    public init() {}

    /// Adds `amount` (1 by default).
    public func increment(by amount: UInt64 = 1) { count.wrappingAdd(amount, ordering: .relaxed) }

    /// The count so far.
    public var value: UInt64 { count.load(ordering: .relaxed) }

    public func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]? {
        let value = self.value
        if hiddenAtZero, value == 0 { return nil }
        return ["\(name)\(labels.rendered()) \(value)"]
    }
}
