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
