import CTetherSystem
import Dispatch
import Glibc

/// Opens outgoing TCP connections: resolves the host off the loop, connects without blocking,
/// and completes on the loop with a `TCPConnection` or an error (including a timeout).
public enum TCPConnector {
    public static func connect(host: String, port: UInt16, on loop: EventLoop, timeout: Duration = .seconds(30),
                               completion: @escaping @Sendable (Result<TCPConnection, NetError>) -> Void) {
        // A numeric address needs no resolver; a name is resolved on a background queue.
        if let address = try? SocketAddress(host: host, port: port) {
            loop.execute { start(address, loop: loop, timeout: timeout, completion: completion) }
            return
        }
        DispatchQueue.global().async {
            switch resolve(host: host, port: port) {
            case let .success(address): loop.execute { start(address, loop: loop, timeout: timeout, completion: completion) }
            case let .failure(error): loop.execute { completion(.failure(error)) }
            }
        }
    }

    static func resolve(host: String, port: UInt16) -> Result<SocketAddress, NetError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else { return .failure(.unresolved(host: host, reason: String(cString: gai_strerror(status)))) }
        defer { freeaddrinfo(list) }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(first.pointee.ai_addrlen)))
        }
        return .success(SocketAddress(storage: storage))
    }

    private static func start(_ address: SocketAddress, loop: EventLoop, timeout: Duration,
                              completion: @escaping @Sendable (Result<TCPConnection, NetError>) -> Void) {
        let fd = tether_socket(address.domain, Int32(SOCK_STREAM.rawValue))
        guard fd >= 0 else { return completion(.failure(.system("socket", errno))) }
        let status = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if status == 0 {
            finish(fd: fd, address: address, loop: loop, completion: completion)
            return
        }
        guard errno == EINPROGRESS else {
            let code = errno
            Glibc.close(fd)
            return completion(.failure(.system("connect", code)))
        }
        let pending = PendingConnect(fd: fd, address: address, loop: loop, completion: completion)
        do {
            pending.token = try loop.register(fd: fd, events: UInt32(TETHER_EPOLLOUT), handler: pending)
        } catch {
            Glibc.close(fd)
            return completion(.failure(error as? NetError ?? .closed))
        }
        pending.timer = loop.schedule(after: timeout) { pending.fail(.timedOut) }
    }

    fileprivate static func finish(fd: Int32, address: SocketAddress, loop: EventLoop,
                                   completion: (Result<TCPConnection, NetError>) -> Void) {
        do {
            completion(.success(try TCPConnection(fd: fd, loop: loop, peer: address)))
        } catch {
            Glibc.close(fd)
            completion(.failure(error as? NetError ?? .closed))
        }
    }
}

/// A connect in progress, waiting for the socket to become writable.
private final class PendingConnect: EventLoopHandler {
    let fd: Int32
    let address: SocketAddress
    let loop: EventLoop
    var completion: (@Sendable (Result<TCPConnection, NetError>) -> Void)?
    var token: UInt64 = 0
    var timer: EventLoop.TimerID?

    init(fd: Int32, address: SocketAddress, loop: EventLoop, completion: @escaping @Sendable (Result<TCPConnection, NetError>) -> Void) {
        self.fd = fd
        self.address = address
        self.loop = loop
        self.completion = completion
    }

    func readable() {}
    func hangup() { writable() }

    func writable() {
        guard let completion else { return }
        self.completion = nil
        if let timer { loop.cancel(timer) }
        loop.deregister(fd: fd, token: token)
        let error = tether_socket_error(fd)
        guard error == 0 else {
            Glibc.close(fd)
            return completion(.failure(.system("connect", error)))
        }
        TCPConnector.finish(fd: fd, address: address, loop: loop, completion: completion)
    }

    func fail(_ error: NetError) {
        guard let completion else { return }
        self.completion = nil
        loop.deregister(fd: fd, token: token)
        Glibc.close(fd)
        completion(.failure(error))
    }
}

extension TCPConnector {
    /// Connects to `url`'s host and port, adding TLS (SNI and hostname verification against
    /// `tls`, or the system trust store) for https/wss. Completes once the transport is ready
    /// to carry plaintext (the TLS handshake itself completes lazily, before the first bytes).
    static func connect(_ url: ClientURL, tls: TLSClientContext?, on loop: EventLoop, timeout: Duration,
                        completion: @escaping @Sendable (Result<any Transport, NetError>) -> Void) {
        connect(host: url.host, port: url.port, on: loop, timeout: timeout) { result in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(tcp):
                guard url.secure else { return completion(.success(tcp)) }
                do {
                    let context = try tls ?? TLSClientContext()
                    completion(.success(try TLSConnection(client: context, serverName: url.host, over: tcp)))
                } catch {
                    tcp.close()
                    completion(.failure(.tls("\(error)")))
                }
            }
        }
    }
}
