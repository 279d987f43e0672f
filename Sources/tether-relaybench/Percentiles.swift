/// Order statistics of a set of samples (nearest rank), reported in the unit they were taken in.
struct Percentiles {
    let count: Int
    let p50, p90, p99, p999, max: UInt64

    init(_ samples: [UInt64]) {
        let sorted = samples.sorted()
        count = sorted.count
        func rank(_ q: Double) -> UInt64 {
            guard !sorted.isEmpty else { return 0 }
            let index = Int((q * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, index))]
        }
        p50 = rank(0.50)
        p90 = rank(0.90)
        p99 = rank(0.99)
        p999 = rank(0.999)
        max = sorted.last ?? 0
    }

    /// `{"n":…,"p50":…,…}` with values divided by `divisor` (ns → µs: 1,000).
    func json(divisor: UInt64) -> String {
        let values = [("p50", p50), ("p90", p90), ("p99", p99), ("p99.9", p999), ("max", max)]
        return "{\"n\":\(count)," + values.map { "\"\($0.0)\":\($0.1 / divisor)" }.joined(separator: ",") + "}"
    }
}
