/// Opens a client WebSocket: TCP connect, the RFC 6455 handshake (validated strictly), then a
/// `WebSocketConnection` in the client role. No `Origin` header is ever sent.
public enum WebSocketClient {
    public enum Failure: Error, Equatable, Sendable {
        case network(NetError)
        /// The server answered the upgrade with something other than a valid 101.
        case refused(status: Int, body: [UInt8])
    }

    public static func connect(_ url: String, headers: HTTPHeaders = HTTPHeaders(), options: WebSocketConnection.Options = .init(),
                               tls: TLSClientContext? = nil, delegate: any WebSocketDelegate & Sendable, on loop: EventLoop,
                               timeout: Duration = .seconds(30),
                               completion: @escaping @Sendable (Result<WebSocketConnection, Failure>) -> Void) {
        let target: ClientURL
        do { target = try ClientURL(url) } catch { return completion(.failure(.network(error))) }
        let (request, key) = WebSocketHandshake.clientRequest(host: target.hostHeader, path: target.target, extraHeaders: headers)
        TCPConnector.connect(target, tls: tls, on: loop, timeout: timeout) { result in
            switch result {
            case let .failure(error): completion(.failure(.network(error)))
            case let .success(connection):
                let handshake = Handshake(connection: connection, key: key, options: options, delegate: delegate, completion: completion)
                handshake.arm(timeout: timeout, failure: .network(.timedOut))
                connection.delegate = handshake
                connection.write(request)
            }
        }
    }

    private final class Handshake: ClientExchange<WebSocketConnection, Failure>, TransportDelegate {
        let key: String
        let options: WebSocketConnection.Options
        let delegate: any WebSocketDelegate
        var parser = HTTPResponseParser()

        init(connection: any Transport, key: String, options: WebSocketConnection.Options, delegate: any WebSocketDelegate,
             completion: @escaping @Sendable (Result<WebSocketConnection, Failure>) -> Void) {
            self.key = key
            self.options = options
            self.delegate = delegate
            super.init(connection: connection, completion: completion)
        }

        func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
            guard !isFinished else { return }
            parser.feed(bytes)
            do throws(HTTPParseError) {
                guard let head = try parser.parseHead() else { return }
                guard WebSocketHandshake.validateServerResponse(status: head.status, headers: head.headers, key: key) else {
                    // What of a refusal's body came with the head is reported.
                    finish(.failure(.refused(status: head.status, body: parser.takeRemaining())))
                    return
                }
                // The socket takes over the connection (and becomes its delegate) before the caller hears of it.
                let socket = WebSocketConnection(connection: connection, role: .client, options: options, delegate: nil)
                finish(.success(socket), closing: false)
                socket.delegate = delegate
                let leftover = parser.takeRemaining()
                if !leftover.isEmpty { leftover.withUnsafeBytes { socket.transport(connection, didRead: $0) } }
            } catch {
                finish(.failure(.refused(status: 0, body: [])))
            }
        }

        func transportDidClose(_ connection: any Transport, error: NetError?) { finish(.failure(.network(error ?? .closed))) }
    }
}
