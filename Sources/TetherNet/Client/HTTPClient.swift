/// A small HTTP/1.1 client for the SDK and tests: one request per connection
/// (`Connection: close`), a deadline for the whole exchange, and redirects never followed —
/// a 3xx is returned to the caller as the final response.
public enum HTTPClient {
    public struct Response: Sendable, Equatable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: [UInt8]
    }

    public static func request(_ method: String, _ url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil,
                               tls: TLSClientContext? = nil, on loop: EventLoop, timeout: UInt64 = .seconds(15),
                               completion: @escaping @Sendable (Result<Response, NetError>) -> Void) {
        let target: ClientURL
        do { target = try ClientURL(url) } catch { return completion(.failure(error)) }
        var text = "\(method) \(target.target) HTTP/1.1\r\nHost: \(target.hostHeader)\r\nConnection: close\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        let bytes = Array(text.utf8) + (body ?? [])
        TCPConnector.connect(target, tls: tls, on: loop, timeout: timeout) { result in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(connection):
                let exchange = Exchange(connection: connection, expectsBody: method != "HEAD", completion: completion)
                exchange.arm(timeout: timeout, failure: .timedOut)
                connection.delegate = exchange
                connection.write(bytes)
            }
        }
    }

    /// JSON POST convenience: sets `Content-Type: application/json`.
    public static func postJSON(_ url: String, body: [UInt8], headers: HTTPHeaders = HTTPHeaders(), tls: TLSClientContext? = nil, on loop: EventLoop,
                                timeout: UInt64 = .seconds(15), completion: @escaping @Sendable (Result<Response, NetError>) -> Void) {
        var all = headers
        all.set("Content-Type", "application/json")
        request("POST", url, headers: all, body: body, tls: tls, on: loop, timeout: timeout, completion: completion)
    }

    private final class Exchange: ClientExchange<Response, NetError>, TransportDelegate {
        var parser = HTTPResponseParser()

        init(connection: any Transport, expectsBody: Bool, completion: @escaping @Sendable (Result<Response, NetError>) -> Void) {
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
            } catch {
                finish(.failure(.invalidAddress("malformed response: \(error)")))
            }
        }
    }
}
