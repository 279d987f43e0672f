import Synchronization

/// A value that goes up and down (open sockets, resident rooms). One relaxed atomic per change.
public final class Gauge: ExposedMetric {
    public static let prometheusType = "gauge"
    private let current = Atomic<Int64>(0)

    public init() {}

    public func set(_ value: Int64) { current.store(value, ordering: .relaxed) }
    public func increment(by amount: Int64 = 1) { current.wrappingAdd(amount, ordering: .relaxed) }
    public func decrement(by amount: Int64 = 1) { current.wrappingSubtract(amount, ordering: .relaxed) }

    public var value: Int64 { current.load(ordering: .relaxed) }

    public func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]? {
        let value = self.value
        if hiddenAtZero, value == 0 { return nil }
        return ["\(name)\(labels.rendered()) \(value)"]
    }
}

/// A metric read only at scrape time, from whatever owns the number (a table's size, the log
/// sink's drop count): nothing to keep in step on the hot path.
struct CallbackMetric: ExposedMetric {
    // Never used: a callback metric's family supplies its type (counter or gauge) itself.
    static var prometheusType: String { "untyped" }

    enum Reading: Sendable {
        case integer(@Sendable () -> Int64)
        case unsigned(@Sendable () -> UInt64)
        case double(@Sendable () -> Double)
    }

    let reading: Reading

    func exposition(name: String, labels: PrometheusLabels, hiddenAtZero: Bool) -> [String]? {
        let text: String
        let zero: Bool
        switch reading {
        case let .integer(read): let v = read(); (text, zero) = (String(v), v == 0)
        case let .unsigned(read): let v = read(); (text, zero) = (String(v), v == 0)
        case let .double(read): let v = read(); (text, zero) = (Prometheus.format(v), v == 0)
        }
        if hiddenAtZero, zero { return nil }
        return ["\(name)\(labels.rendered()) \(text)"]
    }
}
