import Synchronization

/// A value that goes up and down (open sockets, resident rooms). One relaxed atomic per change.
public final class Gauge: ExposedMetric {
    public static let prometheusType = "gauge"
    private let current = Atomic<Int64>(0)

    /// A gauge at 0.
    public init() {}

    /// Sets the value.
    public func set(_ value: Int64) { current.store(value, ordering: .relaxed) }
    /// Raises the value by `amount` (1 by default).
    public func increment(by amount: Int64 = 1) { current.wrappingAdd(amount, ordering: .relaxed) }
    /// Lowers the value by `amount` (1 by default).
    public func decrement(by amount: Int64 = 1) { current.wrappingSubtract(amount, ordering: .relaxed) }

    /// The value now.
    public var value: Int64 { current.load(ordering: .relaxed) }

    public func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]? {
        let value = self.value
        if hiddenAtZero, value == 0 { return nil }
        return ["\(name)\(labels.rendered()) \(value)"]
    }
}
