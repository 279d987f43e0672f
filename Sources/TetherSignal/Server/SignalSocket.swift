import TetherSync
import TetherNet
import TetherService
import TetherWire

/// One `/signal` connection: the host of its `SignalSocketMachine`. It owns the WebSocket, the
/// one timer the machine's deadline needs and the calls to what connections share (the
/// directory, the cluster, the issuer and its limits), feeds the machine each event with the
/// monotonic time, and performs the actions it answers. Confined to its loop: every event,
/// including the directory's, the cluster's and the issuer's answers, runs there.
final class SignalSocket: WebSocketDelegate {
    /// §4: the server pings every 30 s and drops a socket that did not answer the previous one.
    static let keepaliveInterval: Duration = .seconds(30)
    /// A socket whose output stays above the chassis' high-water mark this long (its own
    /// replies or forwarded signals, unread; reading it is paused meanwhile) is closed as §6.4
    /// closes one over its pending-output limit. One keepalive interval: a client that has read
    /// nothing for that long has not seen a ping either.
    static let stallTimeout: Duration = .seconds(30)

    let server: SignalServer
    let loop: EventLoop
    private let lease: SocketLease
    private var socket: WebSocketConnection!
    private(set) var machine: SignalSocketMachine
    private var issuance: (any IssuanceHandle)?
    /// The timer armed for the machine's deadline, and that deadline (monotonic ms).
    private var deadline: (timer: EventLoop.TimerID, at: MonotonicInstant)?

    init(server: SignalServer, lease: SocketLease, transport: any Transport) {
        self.server = server
        self.lease = lease
        loop = transport.loop
        machine = SignalSocketMachine(configuration: .init(signalRateLimit: server.configuration.signalRateLimit,
                                                           clustered: server.cluster != nil))
    }

    /// Takes over the upgraded connection and sends the challenge at once (§5.1, §6.1 step 1).
    func start(_ transport: any Transport, leftover: [UInt8]) {
        var options = WebSocketConnection.Options()
        options.maxFramePayload = SignalSocketMachine.maxMessageBytes
        options.maxMessageSize = SignalSocketMachine.maxMessageBytes
        options.keepaliveInterval = Self.keepaliveInterval
        options.stallTimeout = Self.stallTimeout
        // Nothing is spliced here: a socket is not read once its replies pass the mark itself.
        options.outputReadLimit = 256 * 1024
        socket = WebSocketConnection(connection: transport, role: .server, options: options, delegate: self)
        server.opened(self)
        let challenge = server.random(32)
        let now = server.clock.monotonic()
        perform(machine.open(challenge: challenge, now: now))
        // The time the challenge was stamped with: its timer waits the whole lifetime from there.
        armDeadline(now: now)
        if !leftover.isEmpty { leftover.withUnsafeBytes { socket.transport(transport, didRead: $0) } }
    }

    /// A closing `error`'s close code (§4, §5.6).
    static func closeCode(for code: SignalingErrorCode) -> UInt16 { SignalSocketMachine.closeCode(for: code) }

    // MARK: WebSocketDelegate

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        handle(machine.received(text: text, now: server.clock.monotonic()))
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        handle(machine.received(binary: data, now: server.clock.monotonic()))
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        handle(machine.closed())
        lease.release()
        server.closed(self)
    }

    func webSocketDidStall(_ socket: WebSocketConnection) { handle(machine.stalled()) }

    /// The transport sends the machine's `error` and closes 1009 with its reason itself, in
    /// place of the message it will not read.
    func webSocketOversizeNotice(_ socket: WebSocketConnection) -> (text: [UInt8], reason: String)? {
        var text: [UInt8] = [], notice: (text: [UInt8], reason: String)?
        for action in machine.tooLarge() {
            switch action {
            case let .send(message): text = Array(message.json().utf8)
            case let .close(_, reason, _): notice = (text, reason)
            default: perform(action)
            }
        }
        armDeadline()
        return notice
    }

    // MARK: Events from what connections share (on this loop)

    /// The issuance finished (§6.1 steps 8–9). A socket issues once, so whatever answered was
    /// its issuance: the handle goes whether the machine still wants the result or not.
    func issued(_ result: Result<Issued, IssuanceFailure>, id: SignalingID) {
        issuance = nil
        handle(machine.issued(result, id: id))
    }

    /// No node holds the recipient of a signal this socket sent (or it could not be reached).
    func recipientOffline(call: CallUUID, kind: SignalKind) { handle(machine.recipientOffline(call: call, kind: kind)) }

    /// A forwarded signal for this socket (§6.2 step 5), dropped unless it is routable.
    func deliver(_ text: [UInt8]) {
        guard machine.isRoutable else { return }
        socket.send(text: text)
        handle(machine.queued(outboundBytes: socket.connection.queuedBytes))
    }

    /// The server ends this socket's registration itself (a lapsed cluster lease).
    func end(with code: SignalingErrorCode) {
        guard socket.isOpen else { return }
        handle(machine.end(code))
    }

    /// SIGTERM: 1001 `shutting_down`, no `error` first (§13.1).
    func shutDown() {
        guard socket.isOpen else { return }
        handle(machine.shutDown())
    }

    private func claimed(_ claimed: Bool?, id: SignalingID) { handle(machine.claimed(claimed, id: id)) }

    private func presenceAnswered(_ ids: [SignalingID], _ online: [Bool]) { handle(machine.presenceAnswered(ids, online: online)) }

    // MARK: Actions

    /// An event's actions, then the timer for whatever deadline the machine has left.
    private func handle(_ actions: [SignalSocketAction]) {
        perform(actions)
        armDeadline()
    }

    private func perform(_ actions: [SignalSocketAction]) {
        // Every event reaches the machine through here: the machine and the socket are the loop's.
        loop.assertInEventLoop()
        for action in actions { perform(action) }
    }

    /// The directory answers at once, so its answer goes straight back to the machine; the
    /// registry's and the issuer's come back later, on this loop.
    private func perform(_ action: SignalSocketAction) {
        switch action {
        case let .send(message):
            socket.send(text: Array(message.json().utf8))
        case let .close(code, reason, discarding):
            socket.close(code: code, reason: reason, discardingUnsentOutput: discarding)
        case let .count(metric):
            count(metric)
        case let .diagnostic(line):
            server.diagnostic(line)
        case let .reserve(id):
            let granted = server.directory.reserve(id, for: self)
            perform(machine.reserved(granted, id: id))
        case let .claim(id):
            let confined = UncheckedTransfer(self)
            server.cluster?.claim(id, on: loop) { claimed in confined.value.claimed(claimed, id: id) }
        case let .issue(id):
            issuance = server.issue(for: self, id: id)
        case .abandonIssuance:
            issuance?.cancel()
            issuance = nil
        case let .markRoutable(id, issued):
            let marked = server.directory.markRoutable(id, for: self)
            perform(machine.markedRoutable(marked, id: id, issued: issued))
        case let .release(id):
            server.directory.release(id, for: self)
            server.cluster?.release(id)
        case let .lookUpRecipient(message):
            let recipient = server.directory.routableSocket(message.to)
            for next in machine.recipientLookedUp(message, routable: recipient != nil) {
                if case .forward = next, let recipient { forward(message, to: recipient) } else { perform(next) }
            }
        case .forward:
            break   // only ever the answer to a lookup, which performs it with the recipient found
        case let .forwardToNode(message):
            let confined = UncheckedTransfer(self), loop = self.loop
            server.cluster?.forward(message) { loop.execute { confined.value.recipientOffline(call: message.call, kind: message.kind) } }
        case let .lookUpPresence(ids):
            let online = server.directory.isOnline(ids)
            perform(machine.presenceLookedUp(ids, online: online))
        case let .askNodes(ids, local, asker):
            let confined = UncheckedTransfer(self)
            server.cluster?.online(ids, local: local, on: loop, asker: asker) { answer in confined.value.presenceAnswered(ids, answer) }
        }
    }

    /// The loop's queue keeps one sender's signals in order on the recipient's loop.
    private func forward(_ message: SignalMessage, to recipient: UncheckedTransfer<SignalSocket>) {
        let text = Array(message.json().utf8)
        if recipient.value.loop === loop { return recipient.value.deliver(text) }
        recipient.value.loop.execute { recipient.value.deliver(text) }
    }

    private func count(_ metric: SignalSocketMetric) {
        switch metric {
        case let .error(code): server.metrics.errors.labels(code.rawValue).increment()
        case let .signal(kind, outcome): server.metrics.signal(kind, outcome)
        case .registration: server.metrics.registrations.increment()
        case .presenceQuery: server.metrics.presenceQueries.increment()
        }
    }

    /// One timer for the machine's deadline, re-armed only when the deadline moves. `now`: the
    /// time the deadline was computed from, when the caller has it.
    private func armDeadline(now: MonotonicInstant? = nil) {
        let next = machine.nextDeadline
        if next == deadline?.at { return }
        if let deadline { loop.cancel(deadline.timer) }
        deadline = nil
        guard let next else { return }
        let now = now ?? server.clock.monotonic()
        let timer = loop.schedule(after: next.elapsed(since: now)) { [weak self] in
            guard let self else { return }
            self.deadline = nil
            self.handle(self.machine.tick(now: self.server.clock.monotonic()))
        }
        deadline = (timer, next)
    }
}
