import Glibc
import TetherSync

/// A request as the server hands it to its delegate: head, complete body, and where it came from.
public struct HTTPServerRequest: Sendable {
    public let head: HTTPRequestHead
    public let body: [UInt8]
    public let peer: SocketAddress?
    /// The loop the connection lives on (handlers run here).
    public let loopIndex: Int
}

/// How the server answers a WebSocket upgrade request.
public enum WebSocketUpgradeDecision {
    /// Refuse before the 101 with any status and body; the connection is then closed.
    case refuse(HTTPResponse)
    /// Send the 101 and hand the TCP connection (and any bytes after the handshake) to `open`.
    case accept((any Transport, [UInt8]) -> Void)
    /// Send nothing and hand the connection over as it stands — the request unanswered, any
    /// bytes after its head with it — to `take`, which answers it from elsewhere (a relay node
    /// passing the socket to the node that serves its room: the 101 or refusal comes from there).
    case handOver((any Transport, [UInt8]) -> Void)
}

/// The application behind an `HTTPServer`. Called on the connection's loop thread.
public protocol HTTPServerDelegate: AnyObject, Sendable {
    /// Called as a connection is accepted, before anything is read from it: a response refuses it
    /// at once (written, then the connection closes) — a cap on what one address may hold while
    /// its heads are still arriving. After nil, `connectionLeft(peer:)` follows exactly once,
    /// when the connection closes or is upgraded.
    func admitConnection(peer: SocketAddress?) -> HTTPResponse?
    /// An admitted connection closed or became a WebSocket (whose owner counts it from then on).
    func connectionLeft(peer: SocketAddress?)
    /// Called once a non-upgrade request's head is known, before its body is read: a response
    /// refuses the request at once (without reading the body; the connection then closes), so
    /// checks that must precede the body cap come first. Nil lets the request continue.
    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse?
    /// The body cap for this request's route (413 beyond); called once the head is known.
    func bodyLimit(for head: HTTPRequestHead) -> Int
    /// The answer to a request the parser refused (a body over the cap, a malformed head…),
    /// in the service's own words; nil answers with the parser's status and reason. `head` is
    /// the request's head when it was read before the fault. The connection closes after it.
    func refusal(for error: HTTPParseError, head: HTTPRequestHead?) -> HTTPResponse?
    /// The response to a complete request.
    func respond(to request: HTTPServerRequest) -> HTTPResponse
    /// The response to a complete request, given later and from any thread (for work that must
    /// run elsewhere, e.g. on a room's loop). Call `reply` exactly once. The connection answers
    /// its requests strictly in order, so a pipelined request waits for this one's reply.
    /// The default answers with `respond(to:)` at once.
    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void)
    /// Called for a request carrying `Upgrade: websocket`. `handshake` is the RFC 6455 check of the
    /// request; the delegate may refuse even a valid one (Origin, room, limits).
    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision
}

public extension HTTPServerDelegate {
    func admitConnection(peer: SocketAddress?) -> HTTPResponse? { nil }
    func connectionLeft(peer: SocketAddress?) {}
    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? { nil }
    func bodyLimit(for head: HTTPRequestHead) -> Int { 64 * 1024 }
    func refusal(for error: HTTPParseError, head: HTTPRequestHead?) -> HTTPResponse? { nil }
    func respond(to request: HTTPServerRequest) -> HTTPResponse { .text(501, "not implemented") }
    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) { reply(respond(to: request)) }
    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        .refuse(.text(400, "upgrade not supported"))
    }
}

/// An HTTP/1.1 server on a loop group: one `SO_REUSEPORT` listener per loop, keep-alive and
/// pipelining (answers in request order), a request timeout for slow senders, an idle timeout
/// for kept-alive connections, and WebSocket upgrades handed to the delegate.
public final class HTTPServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port: UInt16 = 0
        public var limits = HTTPRequestParser.Limits()
        /// From a request's first byte to its complete body (slowloris defence): 408 after this.
        public var requestTimeout: Duration = .seconds(30)
        /// A kept-alive connection with no request in progress is closed after this.
        public var idleTimeout: Duration = .seconds(60)
        /// A connection whose responses stay above the transport's high-water mark this long
        /// (its client pipelines requests and never reads the answers; no further request is read
        /// meanwhile) is closed.
        public var stallTimeout: Duration = .seconds(30)
        /// Serve HTTPS (and WSS) with this context; nil serves plain HTTP.
        public var tls: TLSServerContext?
        /// The kernel's send buffer for each accepted connection (`SO_SNDBUF`); nil leaves the
        /// kernel's autotuning, up to a few MiB a connection. A service whose replies are small
        /// sets it, so a client that never reads has the kernel absorb little before the
        /// connection's own queue backs up and it is no longer read: what it can make the service
        /// produce (and spend CPU on) is bounded too, not only what is held.
        public var sendBufferBytes: Int?
        public init() {}
    }

    public let group: EventLoopGroup
    public let configuration: Configuration
    public let delegate: any HTTPServerDelegate
    /// The listeners (one per loop, each closed on its loop) and the port they share.
    private let bound = Locked<(listeners: [UncheckedTransfer<TCPListener>], port: UInt16)>(([], 0))
    public var port: UInt16 { bound.withLock { $0.port } }
    /// Accept back-offs of every listener (out of descriptors or memory), for a metric.
    public let acceptBackOffs = NetCounter()
    /// Open HTTP connections, per loop (each touched only on its loop).
    fileprivate let open: [ConnectionSet]

    public init(group: EventLoopGroup, configuration: Configuration, delegate: any HTTPServerDelegate) {
        self.group = group
        self.configuration = configuration
        self.delegate = delegate
        open = group.loops.map { ConnectionSet(loop: $0) }
    }

    /// Binds and starts accepting on every loop; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        var port = configuration.port
        try TCPListener.checkAvailable(try SocketAddress(host: configuration.host, port: port))
        for loop in group.loops {
            let address = try SocketAddress(host: configuration.host, port: port)
            let listener = try loop.submitAndWait { [self] in
                UncheckedTransfer(try TCPListener(loop: loop, address: address, reusePort: true, backOffs: acceptBackOffs) { [self] fd, peer in
                    accept(fd: fd, peer: peer, on: loop)
                })
            }
            port = listener.value.address.port
            bound.withLock { $0.listeners.append(listener) }
        }
        bound.withLock { $0.port = port }
        return port
    }

    /// Stops accepting new connections (existing ones finish their exchanges).
    public func stopAccepting() {
        let listeners = bound.withLock { bound in
            defer { bound.listeners = [] }
            return bound.listeners
        }
        for listener in listeners {
            _ = try? listener.value.loop.submitAndWait { listener.value.close() }
        }
    }

    /// Stops gracefully: no new connections; kept-alive connections with no request in progress
    /// close at once; a request in progress is answered (with `Connection: close`); whatever is
    /// still open after `grace` is closed, after sending what it has queued. Upgraded WebSocket
    /// connections belong to their owners and are not touched. Returns when done.
    public func shutdown(grace: Duration = .seconds(10)) {
        stopAccepting()
        // Start draining on every loop at once, then wait for all of them.
        var finished: [ThreadSemaphore] = []
        for (index, loop) in group.loops.enumerated() {
            let connections = open[index]
            let done = ThreadSemaphore()
            finished.append(done)
            loop.execute {
                connections.draining = true
                for connection in connections.all where connection.isIdle { connection.closeNow() }
                if connections.all.isEmpty {
                    done.signal()
                    return
                }
                connections.onEmpty = { done.signal() }
                loop.schedule(after: grace) {
                    for connection in connections.all { connection.closeNow() }
                }
            }
        }
        for done in finished { done.wait() }
    }

    private func accept(fd: Int32, peer: SocketAddress?, on loop: EventLoop) {
        if var size = configuration.sendBufferBytes.map(Int32.init(clamping:)) {
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        guard let tcp = try? TCPConnection(fd: fd, loop: loop, peer: peer) else { return }
        let transport: any Transport
        if let tls = configuration.tls {
            guard let secured = try? TLSConnection(server: tls, over: tcp) else { return tcp.close() }
            transport = secured
        } else {
            transport = tcp
        }
        let connection = HTTPServerConnection(connection: transport, server: self, connections: open[loop.index])
        if let refusal = delegate.admitConnection(peer: peer) {
            connection.refuse(refusal)
        } else {
            connection.start()
        }
    }
}

/// The HTTP connections of one loop, for a graceful shutdown.
final class ConnectionSet: Sendable {
    private struct Members {
        var open: [ObjectIdentifier: HTTPServerConnection] = [:]
        var draining = false
        var onEmpty: (() -> Void)?
    }

    private let members: LoopBound<Members>

    init(loop: EventLoop) { members = LoopBound(Members(), loop: loop) }

    var all: [HTTPServerConnection] { Array(members.value.open.values) }

    var draining: Bool {
        get { members.value.draining }
        set { members.value.draining = newValue }
    }

    var onEmpty: (() -> Void)? {
        get { members.value.onEmpty }
        set { members.value.onEmpty = newValue }
    }

    func insert(_ connection: HTTPServerConnection) { members.value.open[ObjectIdentifier(connection)] = connection }

    func remove(_ connection: HTTPServerConnection) {
        members.value.open[ObjectIdentifier(connection)] = nil
        if members.value.open.isEmpty, let onEmpty = members.value.onEmpty {
            members.value.onEmpty = nil
            onEmpty()
        }
    }
}

/// One HTTP connection's state: parser, timers, and the in-order response path.
///
/// Its memory is bounded whatever the client sends: while a request awaits its reply nothing
/// more is read (pipelined requests already read wait in the parser: one read at most); once the
/// responses queued pass the transport's high-water mark no further request is read or handled
/// until they drain; a connection that stays above the mark for `Configuration.stallTimeout` is
/// closed.
final class HTTPServerConnection: TransportDelegate {
    private let connection: any Transport
    private let server: HTTPServer
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time,
    // as on the relay's splice path (where those checks were a quarter of the instructions).
    @exclusivity(unchecked) private var parser: HTTPRequestParser
    @exclusivity(unchecked) private var pendingHead: HTTPRequestHead?
    @exclusivity(unchecked) private var timer: EventLoop.TimerID?
    @exclusivity(unchecked) private var upgraded = false
    /// A request was handed to the delegate and its reply has not come yet.
    @exclusivity(unchecked) private var awaitingReply = false
    /// Admitted by the delegate, which is told once when the connection leaves.
    @exclusivity(unchecked) private var counted = false
    /// Refused at accept: whatever the client sends is not read.
    @exclusivity(unchecked) private var refused = false
    /// Why reading is paused (`Pause` bits): a reply awaited, responses backed up, or both.
    @exclusivity(unchecked) private var pauses = ReadingPauses()
    /// The timer that closes a connection whose responses stay backed up.
    @exclusivity(unchecked) private var stallTimer: EventLoop.TimerID?
    private var outputPaused: Bool { pauses.contains(Pause.output) }

    private enum Pause {
        static let reply: UInt8 = 1
        static let output: UInt8 = 2
    }
    private let connections: ConnectionSet

    init(connection: any Transport, server: HTTPServer, connections: ConnectionSet) {
        self.connection = connection
        self.server = server
        self.connections = connections
        parser = HTTPRequestParser(limits: server.configuration.limits)
    }

    func start() {
        counted = true
        // The set keeps the connection alive until it closes or is upgraded.
        connections.insert(self)
        connection.delegate = self
        armTimer(server.configuration.idleTimeout, idle: true)
    }

    /// Answers `response` without reading anything, and closes.
    func refuse(_ response: HTTPResponse) {
        refused = true
        connections.insert(self)
        connection.delegate = self
        reply(response, closing: true)
    }

    private func left() {
        guard counted else { return }
        counted = false
        server.delegate.connectionLeft(peer: connection.peer)
    }

    /// No request in progress.
    var isIdle: Bool { parser.isIdle && !awaitingReply }

    func closeNow() { connection.closeAfterFlush() }

    private func armTimer(_ delay: Duration, idle: Bool) {
        if let timer { connection.loop.cancel(timer) }
        timer = connection.loop.schedule(after: delay) { [weak self] in
            guard let self, !self.connection.isClosed, !self.upgraded else { return }
            if idle {
                self.connection.close()
            } else {
                self.reply(.text(408, "request timeout"), closing: true)
            }
        }
    }

    func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        guard !refused else { return }
        if parser.isIdle { armTimer(server.configuration.requestTimeout, idle: false) }
        parser.feed(bytes)
        drain()
    }

    private func drain() {
        do throws(HTTPParseError) {
            while !connection.isClosed, !upgraded, !awaitingReply, !outputPaused, let event = try parser.next() {
                switch event {
                case let .head(head):
                    pendingHead = head
                    if head.isWebSocketUpgrade {
                        upgrade(head)
                        return
                    }
                    if let refusal = server.delegate.screen(head, peer: connection.peer) {
                        pendingHead = nil
                        reply(refusal, closing: true, includeBody: head.method != "HEAD")
                        return
                    }
                    parser.bodyLimit = server.delegate.bodyLimit(for: head)
                case let .body(body):
                    guard let head = pendingHead else { continue }
                    pendingHead = nil
                    let request = HTTPServerRequest(head: head, body: body, peer: connection.peer, loopIndex: connection.loop.index)
                    awaitingReply = true
                    // Pipelined requests behind it stay in the kernel until it is answered.
                    pause(Pause.reply)
                    let this = UncheckedTransfer(self)
                    let loop = connection.loop
                    server.delegate.respond(to: request) { response in
                        if loop.inEventLoop {
                            this.value.deliver(response, for: head)
                        } else {
                            loop.execute { this.value.deliver(response, for: head) }
                        }
                    }
                }
            }
        } catch {
            reply(server.delegate.refusal(for: error, head: pendingHead) ?? .text(error.status, error.reason), closing: true)
        }
    }

    /// The delegate's reply to the request in progress; then any pipelined request is handled.
    private func deliver(_ response: HTTPResponse, for head: HTTPRequestHead) {
        guard awaitingReply else { return }
        awaitingReply = false
        guard !connection.isClosed else { return }
        resume(Pause.reply)
        reply(response, closing: !head.keepAlive || connections.draining, includeBody: head.method != "HEAD")
        if parser.isIdle { armTimer(server.configuration.idleTimeout, idle: true) }
        drain()
    }

    private func reply(_ response: HTTPResponse, closing: Bool, includeBody: Bool = true) {
        connection.write(response.serialized(closing: closing, includeBody: includeBody))
        if closing {
            if let timer { connection.loop.cancel(timer) }
            connection.closeAfterFlush()
        }
    }

    private func upgrade(_ head: HTTPRequestHead) {
        let request = HTTPServerRequest(head: head, body: [], peer: connection.peer, loopIndex: connection.loop.index)
        let handshake = WebSocketHandshake.serverResponse(to: head)
        switch server.delegate.upgrade(request, handshake: handshake) {
        case let .refuse(response):
            reply(response, closing: true)
        case let .accept(open):
            guard case let .upgrade(switching) = handshake else {
                if case let .refuse(response) = handshake { reply(response, closing: true) }
                return
            }
            connection.write(switching.serialized())
            release(to: open)
        case let .handOver(take):
            release(to: take)
        }
    }

    /// The connection leaves HTTP: its new owner bounds its output from here (`WebSocketConnection`
    /// or a pipe does) and gets whatever was read past the head.
    private func release(to owner: (any Transport, [UInt8]) -> Void) {
        upgraded = true
        if let timer { connection.loop.cancel(timer) }
        if let stallTimer { connection.loop.cancel(stallTimer) }
        if !pauses.isEmpty { connection.resumeReading() }
        let leftover = parser.takeUnparsed()
        connection.delegate = nil
        connections.remove(self)
        left()
        owner(connection, leftover)
    }

    func transportDidClose(_ connection: any Transport, error: NetError?) {
        if let timer { connection.loop.cancel(timer) }
        if let stallTimer { connection.loop.cancel(stallTimer) }
        connections.remove(self)
        left()
    }

    func transportWritabilityChanged(_ connection: any Transport) {
        guard !upgraded, !connection.isClosed else { return }
        if connection.isWritable {
            if let stallTimer { connection.loop.cancel(stallTimer) }
            stallTimer = nil
            guard outputPaused else { return }
            resume(Pause.output)
            // The requests waiting in the parser are handled from a task: this may run inside the
            // transport's flush, which the delegate must not be entered from.
            let this = UncheckedTransfer(self)
            connection.loop.execute { if !this.value.outputPaused { this.value.drain() } }
        } else if !outputPaused {
            pause(Pause.output)
            stallTimer = connection.loop.schedule(after: server.configuration.stallTimeout) { [weak self] in
                guard let self, !self.upgraded, !self.connection.isWritable else { return }
                self.connection.close()
            }
        }
    }

    private func pause(_ reason: UInt8) {
        if pauses.add(reason) { connection.pauseReading() }
    }

    private func resume(_ reason: UInt8) {
        if pauses.lift(reason) { connection.resumeReading() }
    }
}
