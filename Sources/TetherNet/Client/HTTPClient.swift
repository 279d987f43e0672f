import TetherSync

/// A small HTTP/1.1 client for the SDK, tests and a service's outbound calls: one request per
/// connection (`Connection: close`), one deadline for the whole exchange (connect, TLS, answer),
/// a bound on the response body, redirects never followed — a 3xx is returned to the caller as
/// the final response — and cancellation.
public enum HTTPClient {
    /// Cancels an exchange in flight: it completes with `NetError.cancelled` (if it had not
    /// completed) and its connection closes. Safe from any thread, any number of times.
    public final class Cancellation: Sendable {
        private let state = Locked<(cancelled: Bool, action: (@Sendable () -> Void)?)>((false, nil))

        public func cancel() {
            let action = state.withLock { state -> (@Sendable () -> Void)? in
                guard !state.cancelled else { return nil }
                state.cancelled = true
                defer { state.action = nil }
                return state.action
            }
            action?()
        }

        var isCancelled: Bool { state.withLock { $0.cancelled } }

        /// What cancelling does now; runs at once if already cancelled.
        func onCancel(_ action: @escaping @Sendable () -> Void) {
            let runNow = state.withLock { state -> Bool in
                if state.cancelled { return true }
                state.action = action
                return false
            }
            if runNow { action() }
        }
    }

    public struct Response: Sendable, Equatable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: [UInt8]
    }

    @discardableResult
    public static func request(_ method: String, _ url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil,
                               tls: TLSClientContext? = nil, on loop: EventLoop, timeout: Duration = .seconds(15),
                               maxResponseBody: Int = 16 * 1024 * 1024,
                               completion: @escaping @Sendable (Result<Response, NetError>) -> Void) -> Cancellation {
        let cancellation = Cancellation()
        let target: ClientURL
        do { target = try ClientURL(url) } catch {
            completion(.failure(error))
            return cancellation
        }
        var text = "\(method) \(target.target) HTTP/1.1\r\nHost: \(target.hostHeader)\r\nConnection: close\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        let bytes = Array(text.utf8) + (body ?? [])
        // One deadline for the whole exchange: what connecting used is not given again.
        let deadline = loop.clock.now() + timeout
        TCPConnector.connect(target, tls: tls, on: loop, timeout: timeout) { result in
            switch result {
            case let .failure(error): completion(.failure(cancellation.isCancelled ? .cancelled : error))
            case let .success(connection):
                let exchange = Exchange(connection: connection, expectsBody: method != "HEAD", maxBody: maxResponseBody, completion: completion)
                let now = loop.clock.now()
                exchange.arm(timeout: deadline.elapsed(since: now), failure: .timedOut)
                connection.delegate = exchange
                connection.write(bytes)
                // The exchange is loop-confined; only the loop touches it, after the hop.
                let confined = UncheckedTransfer(exchange)
                cancellation.onCancel { loop.execute { confined.value.finish(.failure(.cancelled)) } }
            }
        }
        return cancellation
    }

    /// JSON POST convenience: sets `Content-Type: application/json`.
    @discardableResult
    public static func postJSON(_ url: String, body: [UInt8], headers: HTTPHeaders = HTTPHeaders(), tls: TLSClientContext? = nil, on loop: EventLoop,
                                timeout: Duration = .seconds(15), maxResponseBody: Int = 16 * 1024 * 1024,
                                completion: @escaping @Sendable (Result<Response, NetError>) -> Void) -> Cancellation {
        var all = headers
        all.set("Content-Type", "application/json")
        return request("POST", url, headers: all, body: body, tls: tls, on: loop, timeout: timeout, maxResponseBody: maxResponseBody,
                       completion: completion)
    }

    private final class Exchange: ClientExchange<Response, NetError>, TransportDelegate {
        var parser = HTTPResponseParser()

        init(connection: any Transport, expectsBody: Bool, maxBody: Int, completion: @escaping @Sendable (Result<Response, NetError>) -> Void) {
            parser = HTTPResponseParser(maxBodyBytes: maxBody)
            super.init(connection: connection, completion: completion)
            parser.expectsBody = expectsBody
        }

        func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
            parser.feed(bytes)
            progress(closed: false)
        }

        func transportDidClose(_ connection: any Transport, error: NetError?) {
            progress(closed: true)
            finish(.failure(error ?? (connection is TLSConnection ? .tls("connection closed before a response (certificate rejected?)") : .closed)))
        }

        private func progress(closed: Bool) {
            do throws(HTTPParseError) {
                guard let head = try parser.parseHead(), let body = try parser.body(closed: closed) else { return }
                finish(.success(Response(status: head.status, headers: head.headers, body: body)))
            } catch .payloadTooLarge {
                finish(.failure(.responseTooLarge))
            } catch {
                finish(.failure(.invalidAddress("malformed response: \(error)")))
            }
        }
    }
}
