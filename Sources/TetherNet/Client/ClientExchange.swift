/// The shared shape of a client exchange over a fresh connection: one completion, called once,
/// with a deadline; finishing cancels the deadline, closes the connection and releases the
/// exchange (which keeps itself alive until then).
class ClientExchange<Success, Failure: Error> {
    let connection: any Transport
    private var completion: (@Sendable (Result<Success, Failure>) -> Void)?
    private var timer: EventLoop.TimerID?
    private var retainSelf: ClientExchange?

    init(connection: any Transport, completion: @escaping @Sendable (Result<Success, Failure>) -> Void) {
        self.connection = connection
        self.completion = completion
        retainSelf = self
    }

    /// Fails with `failure` if not finished within `timeout`.
    func arm(timeout: Duration, failure: Failure) {
        timer = connection.loop.schedule(after: timeout) { [unowned(unsafe) self] in self.finish(.failure(failure)) }
    }

    var isFinished: Bool { completion == nil }

    /// Completes (once) and closes the connection.
    func finish(_ result: Result<Success, Failure>, closing: Bool = true) {
        guard let completion else { return }
        self.completion = nil
        if let timer { connection.loop.cancel(timer) }
        if closing { connection.close() }
        retainSelf = nil
        completion(result)
    }
}
