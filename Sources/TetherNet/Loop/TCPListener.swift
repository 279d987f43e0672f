import CTetherSystem
import Glibc

/// A listening socket on one loop. Accepted sockets are handed to `onAccept` on that loop.
///
/// Out of descriptors (EMFILE/ENFILE) or memory (ENOBUFS/ENOMEM), accepting cannot make
/// progress, yet level-triggered epoll keeps reporting the waiting backlog: the listener then
/// stops watching its socket for a back-off (see `TCPListener+BackOff.swift`) instead of
/// spinning, and counts it in `backOffs`.
public final class TCPListener: EventLoopHandler {
    public let loop: EventLoop
    public let address: SocketAddress
    /// Back-offs taken for want of descriptors or memory (shared by a server's listeners).
    public let backOffs: NetCounter
    let fd: Int32
    var token: UInt64 = 0
    private let onAccept: (Int32, SocketAddress?) -> Void
    public private(set) var isClosed = false
    /// The next back-off's length; reset by a successful accept.
    var nextBackOff = TCPListener.initialBackOff
    var backOffTimer: EventLoop.TimerID?

    /// Throws `addressInUse` when some socket already holds `address`. The loops of one server
    /// share a port with `SO_REUSEPORT`, which would equally let a second server process of the
    /// same user join it and silently take a share of the connections; a bind without
    /// `SO_REUSEPORT` fails if anyone holds the port, so it is tried first. Port 0 is never taken.
    public static func checkAvailable(_ address: SocketAddress) throws {
        guard address.port != 0 else { return }
        let fd = tether_socket(address.domain, Int32(SOCK_STREAM.rawValue))
        guard fd >= 0 else { throw NetError.system("socket", errno) }
        defer { Glibc.close(fd) }
        _ = tether_set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        if address.family == .ipv6 { _ = tether_set_ipv6_only(fd, 0) }
        guard address.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
            let code = errno
            throw code == EADDRINUSE ? NetError.addressInUse("\(address)") : NetError.system("bind \(address)", code)
        }
    }

    /// Binds and listens. `reusePort` lets one listener per loop share the port (the kernel
    /// spreads connections across them). An IPv6 `::` listener also accepts IPv4.
    public init(loop: EventLoop, address: SocketAddress, reusePort: Bool = false, backlog: Int32 = 4096,
                backOffs: NetCounter = NetCounter(), onAccept: @escaping (Int32, SocketAddress?) -> Void) throws {
        loop.assertInEventLoop()
        self.loop = loop
        self.backOffs = backOffs
        self.onAccept = onAccept
        let fd = tether_socket(address.domain, Int32(SOCK_STREAM.rawValue))
        guard fd >= 0 else { throw NetError.system("socket", errno) }
        _ = tether_set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        if reusePort { _ = tether_set_reuse_port(fd) }
        if address.family == .ipv6 { _ = tether_set_ipv6_only(fd, 0) }
        let bound = address.withSockAddr { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw NetError.system("bind \(address)", code)
        }
        guard listen(fd, backlog) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw NetError.system("listen", code)
        }
        self.fd = fd
        self.address = SocketAddress.local(of: fd) ?? address
        token = try loop.register(fd: fd, events: UInt32(TETHER_EPOLLIN), handler: self)
    }

    public func readable() {
        // Accept everything pending, up to a batch, then let other handlers run.
        for _ in 0..<256 {
            guard !isClosed, backOffTimer == nil else { return }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { tether_accept(fd, $0, &length) }
            }
            if client < 0 {
                switch Self.classify(errno) {
                case .drained: return
                case .connectionFailed: continue
                case .exhausted: return backOff()
                }
            }
            nextBackOff = Self.initialBackOff
            onAccept(client, SocketAddress(storage: storage))
        }
    }

    public func writable() {}
    public func hangup() { close() }

    public func close() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        isClosed = true
        if let backOffTimer { loop.cancel(backOffTimer) }
        backOffTimer = nil
        loop.deregister(fd: fd, token: token)
        Glibc.close(fd)
    }
}
