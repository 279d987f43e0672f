import CTetherSystem
import Glibc

/// A listening socket on one loop. Accepted sockets are handed to `onAccept` on that loop.
public final class TCPListener: EventLoopHandler {
    public let loop: EventLoop
    public let address: SocketAddress
    private let fd: Int32
    private var token: UInt64 = 0
    private let onAccept: (Int32, SocketAddress?) -> Void
    public private(set) var isClosed = false

    /// Binds and listens. `reusePort` lets one listener per loop share the port (the kernel
    /// spreads connections across them). An IPv6 `::` listener also accepts IPv4.
    public init(loop: EventLoop, address: SocketAddress, reusePort: Bool = false, backlog: Int32 = 4096,
                onAccept: @escaping (Int32, SocketAddress?) -> Void) throws {
        self.loop = loop
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
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { tether_accept(fd, $0, &length) }
            }
            if client < 0 {
                // EMFILE/ENFILE: out of descriptors; the backlog absorbs the rest until some close.
                return
            }
            onAccept(client, SocketAddress(storage: storage))
        }
    }

    public func writable() {}
    public func hangup() { close() }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        loop.deregister(fd: fd, token: token)
        Glibc.close(fd)
    }
}

/// N loops, each on its own thread.
public final class EventLoopGroup: @unchecked Sendable {
    public let loops: [EventLoop]
    private let counter = NetLock()
    private var nextIndex = 0

    /// `count` loops (default: one per CPU).
    public init(count: Int? = nil, clock: any NetClock = MonotonicClock()) throws {
        let count = count ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        loops = try (0..<max(1, count)).map { try EventLoop(index: $0, clock: clock) }
        for loop in loops { loop.start() }
    }

    /// Loops in turn.
    public func next() -> EventLoop {
        counter.withLock {
            defer { nextIndex = (nextIndex + 1) % loops.count }
            return loops[nextIndex]
        }
    }

    /// The loop a key (a room name, say) always maps to.
    public func loop(forKey key: some Hashable) -> EventLoop { loops[abs(key.hashValue % loops.count)] }

    /// The loop for a stable 64-bit hash (stable across runs, unlike `hashValue`).
    public func loop(forHash hash: UInt64) -> EventLoop { loops[Int(hash % UInt64(loops.count))] }

    /// Stops every loop after it drains its queued tasks, and joins the threads.
    public func shutdown() {
        for loop in loops { loop.shutdown() }
    }
}

extension EventLoop {
    /// Runs `body` on this loop and waits for its result (never call from this loop).
    public func submitAndWait<R: Sendable>(_ body: @escaping @Sendable () throws -> R) throws -> R {
        precondition(!inEventLoop, "submitAndWait from the loop itself would deadlock")
        let done = DispatchSemaphoreLite()
        let box = ResultBox<R>()
        execute {
            box.result = Result { try body() }
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }
}

final class ResultBox<R>: @unchecked Sendable {
    var result: Result<R, any Error>?
}

/// A counting semaphore on a pthread condition variable.
final class DispatchSemaphoreLite: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var value = 0

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        value += 1
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait() {
        pthread_mutex_lock(&mutex)
        while value == 0 { pthread_cond_wait(&condition, &mutex) }
        value -= 1
        pthread_mutex_unlock(&mutex)
    }
}
