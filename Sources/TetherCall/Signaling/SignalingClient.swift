public import TetherNet
public import TetherWire
public import TetherDevice

/// The SDK's connection to a `tether signal` server (signaling.md §4-§6): it answers the
/// challenge, registers the identity, keeps the socket alive (a ping every 15 s, §4), sends
/// signed signals, asks presence, hands every forwarded signal to its event handler, and
/// reconnects with the shipping clients' back-off when the connection is lost.
///
/// Confined to `loop`: events are delivered there, and public methods may be called from any
/// thread (they hop onto it).
public final class SignalingClient: Sendable {
    /// What the client reports, on its loop.
    public enum Event: Sendable {
        /// Registered (again, after a reconnect): the ID is routable and calls may use these
        /// ICE servers.
        case registered(SignalingRegistration)
        /// A signal forwarded to this ID. Only `to` has been checked; the recipient checks of
        /// §7.2 are the call machine's.
        case signal(SignalMessage)
        /// The server refused a signal this client sent (`offline`: the peer is not online).
        case signalRefused(SignalingRefusal)
        /// The connection ended. `retryIn` is the delay before the next attempt, in seconds; nil
        /// when the client has stopped (asked to, a final failure, or `reconnects` off).
        case disconnected(SignalingFailure, retryIn: Duration?)
    }

    /// Why a presence query got no answer.
    public enum QueryError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The client is not registered (connecting, or stopped).
        case notRegistered
        /// The server refused the query (§5.5, §5.6).
        case refused(SignalingRefusal)
        /// The connection ended before the answer came.
        case disconnected

        /// A sentence for the user.
        public var description: String {
            switch self {
            case .notRegistered: "signaling: not registered"
            case let .refused(refusal): "signaling: presence refused (\(refusal))"
            case .disconnected: "signaling: the connection ended before the answer"
            }
        }
    }

    /// The server's `challenge` arrives at once and issuance takes at most 8 s (§8.3): a
    /// registration that has not completed in 20 s is abandoned and tried again.
    static let registrationTimeout: Duration = .seconds(20)
    /// §4: clients ping every 15 s (and drop a server that did not answer the previous ping).
    static let keepaliveInterval: Duration = .seconds(15)
    /// A forwarded signal is at most 65,536 bytes (the server's own message bound) plus the
    /// server's re-serialisation, which only drops fields.
    static let maxMessageSize = 65_536

    /// The loop everything runs on.
    public let loop: EventLoop
    /// The identity it registers.
    public let identity: CallIdentity
    /// The server it connects to.
    public let endpoint: SignalingEndpoint
    private let tls: TLSClientContext?
    private let reconnects: Bool
    private let onEvent: @Sendable (Event) -> Void

    // Everything that changes lives on `loop`, asserted at each access.
    private struct State {
        var socket: WebSocketConnection?
        var session: SignalingSession?
        var registrationTimer: EventLoop.TimerID?
        var reconnectTimer: EventLoop.TimerID?
        var backoff = ReconnectBackoff()
        var stopped = false
        var started = false
        var presenceWaiters: [CheckedContinuation<Result<[SignalingID: Bool], QueryError>, Never>] = []
        /// The registration of the open connection (nil while connecting or disconnected).
        var registration: SignalingRegistration?
    }

    private let state: LoopBound<State>

    private var socket: WebSocketConnection? {
        get { state.value.socket }
        _modify { yield &state.value.socket }
    }
    private var session: SignalingSession? {
        get { state.value.session }
        _modify { yield &state.value.session }
    }
    private var registrationTimer: EventLoop.TimerID? {
        get { state.value.registrationTimer }
        _modify { yield &state.value.registrationTimer }
    }
    private var reconnectTimer: EventLoop.TimerID? {
        get { state.value.reconnectTimer }
        _modify { yield &state.value.reconnectTimer }
    }
    private var backoff: ReconnectBackoff {
        get { state.value.backoff }
        _modify { yield &state.value.backoff }
    }
    private var stopped: Bool {
        get { state.value.stopped }
        _modify { yield &state.value.stopped }
    }
    private var started: Bool {
        get { state.value.started }
        _modify { yield &state.value.started }
    }
    private var presenceWaiters: [CheckedContinuation<Result<[SignalingID: Bool], QueryError>, Never>] {
        get { state.value.presenceWaiters }
        _modify { yield &state.value.presenceWaiters }
    }
    private var registration: SignalingRegistration? {
        get { state.value.registration }
        _modify { yield &state.value.registration }
    }

    /// - Parameters:
    ///   - endpoint: the server, its URL already held to the rules of §3.5.
    ///   - identity: the identity to register.
    ///   - loop: the loop the client runs on; events are delivered there.
    ///   - tls: the trust for `wss://` (default: the system roots).
    ///   - reconnects: false for one attempt only (scripts): the first failure stops the client.
    ///   - onEvent: the handler, on `loop`.
    public init(endpoint: SignalingEndpoint, identity: CallIdentity, loop: EventLoop, tls: TLSClientContext? = nil, reconnects: Bool = true,
                onEvent: @escaping @Sendable (Event) -> Void) throws(NetError) {
        let url = try ClientURL(endpoint.url)
        self.endpoint = endpoint
        self.identity = identity
        self.loop = loop
        state = LoopBound(State(), loop: loop)
        self.reconnects = reconnects
        self.onEvent = onEvent
        if url.secure {
            if let tls {
                self.tls = tls
            } else {
                do throws(TLSError) { self.tls = try TLSClientContext() } catch { throw NetError.tls(error.description) }
            }
        } else {
            self.tls = nil
        }
    }

    /// Connects (and, with `reconnects`, keeps connecting after every loss).
    public func start() {
        onLoop { client in
            guard !client.started else { return }
            client.started = true
            client.connect()
        }
    }

    /// Closes the connection (1000) and stops reconnecting.
    public func stop() {
        onLoop { client in
            guard !client.stopped else { return }
            client.stopped = true
            if let timer = client.reconnectTimer { client.loop.cancel(timer) }
            client.reconnectTimer = nil
            let socket = client.socket
            client.finish(SignalingFailure(closeCode: WebSocketCloseCode.normal, reason: "", error: nil,
                                           registered: client.registration != nil, localProblem: "stopped"))
            socket?.close(code: WebSocketCloseCode.normal)
        }
    }

    /// Sends a signed envelope; dropped when not registered (a call in setup then times out, as
    /// it would if the envelope were lost on the way).
    public func send(_ signal: SignalMessage) {
        let text = Array(signal.json().utf8)
        onLoop { client in
            guard client.session?.isRegistered == true else { return }
            client.socket?.send(text: text)
        }
    }

    /// The registration of the open connection (nil while connecting or disconnected), read on
    /// the loop.
    public func currentRegistration() async -> SignalingRegistration? {
        await withCheckedContinuation { continuation in onLoop { continuation.resume(returning: $0.registration) } }
    }

    /// Which of `ids` (1-16, distinct) are routable now (§5.5).
    public func presence(_ ids: [SignalingID]) async -> Result<[SignalingID: Bool], QueryError> {
        await withCheckedContinuation { continuation in
            onLoop { client in
                guard let text = client.session?.presence(ids) else { return continuation.resume(returning: .failure(.notRegistered)) }
                client.presenceWaiters.append(continuation)
                client.socket?.send(text: Array(text.utf8))
            }
        }
    }

    private func onLoop(_ body: @escaping (SignalingClient) -> Void) {
        let transfer = UncheckedTransfer(body)
        if loop.inEventLoop { body(self) } else { loop.execute { [self] in transfer.value(self) } }
    }

    // MARK: Connection

    private func connect() {
        loop.assertInEventLoop()
        guard !stopped else { return }
        var options = WebSocketConnection.Options()
        options.keepaliveInterval = Self.keepaliveInterval
        options.maxMessageSize = Self.maxMessageSize
        options.maxFramePayload = Self.maxMessageSize
        let delegate = SocketDelegate(client: self)
        // The completion runs on the loop, before the socket reads what came with the handshake
        // (the challenge may): the socket must be this client's by then.
        WebSocketClient.connect(endpoint.url, options: options, tls: tls, delegate: delegate, on: loop, timeout: .seconds(10)) { [self] result in
            self.loop.assertInEventLoop()
            self.connected(result)
        }
    }

    private func connected(_ result: Result<WebSocketConnection, WebSocketClient.Failure>) {
        switch result {
        case let .failure(failure):
            let what: String
            switch failure {
            case let .network(error): what = "cannot reach the server: \(error)"
            case let .refused(status, body): what = "the server refused the connection (\(status) \(String(decoding: body.prefix(200), as: UTF8.self)))"
            }
            lost(.unreachable(what))
        case let .success(socket):
            guard !stopped else { return socket.close(code: WebSocketCloseCode.normal) }
            self.socket = socket
            session = SignalingSession(identity: identity)
            registrationTimer = loop.schedule(after: Self.registrationTimeout) { [self] in
                guard self.socket === socket, self.registration == nil else { return }
                self.abandon(socket, .protocolViolation("no registration within 20 s"))
            }
        }
    }

    fileprivate func received(_ bytes: [UInt8], on socket: WebSocketConnection) {
        guard socket === self.socket, var session else { return }
        let outputs = session.receive(bytes)
        self.session = session
        for output in outputs {
            switch output {
            case let .send(text): socket.send(text: Array(text.utf8))
            case let .registered(registration):
                if let timer = registrationTimer { loop.cancel(timer) }
                registrationTimer = nil
                self.registration = registration
                backoff.reset()
                onEvent(.registered(registration))
            case let .signal(signal): onEvent(.signal(signal))
            case let .presence(answers):
                guard !presenceWaiters.isEmpty else { continue }
                presenceWaiters.removeFirst().resume(returning: .success(Dictionary(answers.map { ($0.id, $0.online) }, uniquingKeysWith: { a, _ in a })))
            case let .presenceRefused(refusal):
                guard !presenceWaiters.isEmpty else { continue }
                presenceWaiters.removeFirst().resume(returning: .failure(.refused(refusal)))
            case let .signalRefused(refusal): onEvent(.signalRefused(refusal))
            case let .fail(failure): abandon(socket, failure)
            }
        }
    }

    fileprivate func closed(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        guard socket === self.socket else { return }
        let failure = session?.failure(closeCode: code, reason: reason) ?? SignalingFailure(closeCode: code, reason: reason, error: nil, registered: false)
        lost(failure)
    }

    /// This side gives up on the connection (a protocol violation, a registration that hangs).
    private func abandon(_ socket: WebSocketConnection, _ failure: SignalingFailure) {
        socket.close(code: failure.closeCode == 1002 ? WebSocketCloseCode.protocolError : WebSocketCloseCode.normal)
        lost(failure)
    }

    private func lost(_ failure: SignalingFailure) {
        guard !stopped else { return }
        let retry = reconnects && !failure.isFinal
        if !retry { stopped = true }
        let delay = retry ? backoff.next() : nil
        finish(failure, retryIn: delay)
        if let delay {
            reconnectTimer = loop.schedule(after: delay) { [self] in
                self.reconnectTimer = nil
                self.connect()
            }
        }
    }

    /// Forgets the connection: pending queries fail, the handler hears why.
    private func finish(_ failure: SignalingFailure, retryIn: Duration? = nil) {
        if let timer = registrationTimer { loop.cancel(timer) }
        registrationTimer = nil
        socket = nil
        session = nil
        registration = nil
        let waiters = presenceWaiters
        presenceWaiters = []
        for waiter in waiters { waiter.resume(returning: .failure(.disconnected)) }
        onEvent(.disconnected(failure, retryIn: retryIn))
    }
}

/// The socket's delegate: the client is held weakly so that a client the application dropped
/// is not kept alive by its socket.
private final class SocketDelegate: WebSocketDelegate, Sendable {
    weak let client: SignalingClient?

    init(client: SignalingClient) { self.client = client }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) { client?.received(text, on: socket) }
    // The server sends only text (§4); a binary frame is read the same way and fails the parse
    // if it is not a server message.
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) { client?.received(data, on: socket) }
    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) { client?.closed(socket, code: code, reason: reason) }
}
