import Dispatch
import TetherNet

/// Registers a range of clients with at most `concurrency` registrations in flight (a new one
/// starts as each ends), recording when each began and when it was registered, and why any
/// was not. Runs on the clients' loop; `run` blocks the calling thread until all have ended.
final class Registrar: @unchecked Sendable {
    let url: String
    let concurrency: Int
    private var pending: [Int] = []
    private var clients: [BenchClient] = []
    private var remaining = 0
    private(set) var durations: [UInt64] = []
    /// From each challenge to its `registered` (`BenchClient.challengedAt`).
    private(set) var answerDurations: [UInt64] = []
    private(set) var failures: [String: Int] = [:]
    private let finished = DispatchSemaphore(value: 0)

    init(url: String, concurrency: Int) {
        self.url = url
        self.concurrency = max(1, concurrency)
    }

    /// Registers `clients[range]`; returns (first start, last registration) in monotonic ns.
    func run(_ clients: [BenchClient], _ range: Range<Int>) -> (start: UInt64, end: UInt64) {
        guard let loop = clients.first?.loop, !range.isEmpty else { return (Measure.now(), Measure.now()) }
        let start = Measure.now()
        loop.execute { [self] in
            self.clients = clients
            pending = Array(range.reversed())
            remaining = range.count
            for _ in 0..<min(concurrency, range.count) { startNext() }
        }
        finished.wait()
        return (start, Measure.now())
    }

    private func startNext() {
        guard let index = pending.popLast() else { return }
        let began = Measure.now()
        clients[index].register(url: url, forwardedFor: BenchClient.forwardedAddress(index)) { [self] failure in
            if let failure {
                failures[failure, default: 0] += 1
            } else {
                let now = Measure.now()
                durations.append(now - began)
                answerDurations.append(now - clients[index].challengedAt)
            }
            remaining -= 1
            if remaining == 0 { finished.signal() } else { startNext() }
        }
    }

    var failureCount: Int { failures.values.reduce(0, +) }

    var failureJSON: JSON { .counts(failures) }
}
