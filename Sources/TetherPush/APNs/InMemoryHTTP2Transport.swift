import Synchronization
import TetherSync

/// An `HTTP2Transport` with no network: each request is recorded and answered by `answer`, on
/// the caller's thread. For tests of the APNs client and the push relay, and for benchmarks that
/// must not measure APNs.
public final class InMemoryHTTP2Transport: HTTP2Transport, Sendable {
    private let answer: Locked<@Sendable (HTTP2Request) -> HTTP2Outcome>
    private let sent = Locked<[HTTP2Request]>([])
    private let connections = Atomic<Int>(0)

    /// - Parameter answer: APNs' answer to each request (default 200 with an empty body).
    public init(answer: @escaping @Sendable (HTTP2Request) -> HTTP2Outcome = { _ in .response(status: 200, body: []) }) {
        self.answer = Locked(answer)
    }

    /// Replaces how requests are answered.
    public func answer(with answer: @escaping @Sendable (HTTP2Request) -> HTTP2Outcome) { self.answer.withLock { $0 = answer } }

    /// Every request sent so far, oldest first.
    public var requests: [HTTP2Request] { sent.withLock { $0 } }

    /// One connection, plus one per request that asked for a fresh one.
    public var connectionsOpened: Int { connections.load(ordering: .relaxed) }

    /// Records `request` and answers it as the test arranged.
    public func send(_ request: HTTP2Request, completion: @escaping @Sendable (HTTP2Outcome) -> Void) {
        let first = sent.withLock { sent -> Bool in
            sent.append(request)
            return sent.count == 1
        }
        if first || request.freshConnection { connections.add(1, ordering: .relaxed) }
        completion(answer.withLock { $0 }(request))
    }

    public func shutdown() {}
}
