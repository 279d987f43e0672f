import TetherCrypto
import TetherNet
import TetherService
import TetherWire

/// One `/signal` connection (signaling.md §5, §6): challenged → pending → registered, every
/// answer and close of §5.6 in the order of §6.1 and §6.2. Confined to its loop; the directory
/// and the issuance limits are what it shares.
final class SignalSocket: WebSocketDelegate {
    static let maxMessageBytes = 65_536
    static let challengeLifetimeMs: UInt64 = 10_000
    /// §6.4: pending outbound bytes beyond what the kernel took.
    static let maxPendingOutbound = 1 << 20
    static let rateWindowMs: UInt64 = 10_000
    static let presencePerWindow = 10
    /// §4: the server pings every 30 s and drops a socket that did not answer the previous one.
    static let keepaliveInterval: UInt64 = .seconds(30)
    /// A socket whose output stays above the chassis' high-water mark this long (its own
    /// replies or forwarded signals, unread; reading it is paused meanwhile) is closed as §6.4
    /// closes one over its pending-output limit. One keepalive interval: a client that has read
    /// nothing for that long has not seen a ping either.
    static let stallTimeout: UInt64 = .seconds(30)

    enum Stage {
        case challenged(challenge: String, sentAtMs: UInt64)
        case pending(SignalingID)
        case registered(SignalingID)
        case closed
    }

    let server: SignalServer
    let loop: EventLoop
    private let lease: SocketLease
    private var socket: WebSocketConnection!
    private(set) var stage: Stage = .closed
    private var challengeTimer: EventLoop.TimerID?
    private var issuance: (any IssuanceHandle)?
    /// §6.4's 50 per window unless `SIGNAL_SIGNAL_RATE_LIMIT` says otherwise (a limit of 0 never refuses).
    private var signalWindow: FixedWindow
    private var presenceWindow = FixedWindow(limit: SignalSocket.presencePerWindow, window: SignalSocket.rateWindowMs)
    /// The registered ID's key, kept from its registration's verify: every signal's `from` must
    /// be that ID (§6.2 step 1), so each signal is verified with it as it stands.
    private var signingKey: Ed25519.PublicKey?

    init(server: SignalServer, lease: SocketLease, transport: any Transport) {
        self.server = server
        self.lease = lease
        loop = transport.loop
        signalWindow = FixedWindow(limit: server.configuration.signalRateLimit, window: Self.rateWindowMs)
    }

    /// Takes over the upgraded connection and sends the challenge at once (§5.1, §6.1 step 1).
    func start(_ transport: any Transport, leftover: [UInt8]) {
        var options = WebSocketConnection.Options()
        options.maxFramePayload = Self.maxMessageBytes
        options.maxMessageSize = Self.maxMessageBytes
        options.keepaliveInterval = Self.keepaliveInterval
        options.stallTimeout = Self.stallTimeout
        // Nothing is spliced here: a socket is not read once its replies pass the mark itself.
        options.outputReadLimit = 256 * 1024
        socket = WebSocketConnection(connection: transport, role: .server, options: options, delegate: self)
        server.opened(self)
        let challenge = Base64.encode(server.random(32))
        stage = .challenged(challenge: challenge, sentAtMs: server.clock.monotonicMs())
        send(.challenge(challenge))
        challengeTimer = loop.schedule(after: Self.challengeLifetimeMs * 1_000_000) { [weak self] in
            guard let self, case .challenged = self.stage else { return }
            self.end(with: .challengeExpired)
        }
        if !leftover.isEmpty { leftover.withUnsafeBytes { socket.transport(transport, didRead: $0) } }
    }

    // MARK: Receiving

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) { handle(text) }

    /// §4: a binary frame's payload is read as UTF-8 text; invalid UTF-8 is a `bad_message`.
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        guard String(validating: data, as: UTF8.self) != nil else { return badMessage() }
        handle(data)
    }

    private func handle(_ bytes: [UInt8]) {
        guard let (type, fields) = SignalingClientMessage.classify(bytes) else { return badMessage() }
        switch type {
        case .register:
            register(fields)
        case .signal, .presence:
            // §13.1: before the ID is routable, other fields go unchecked.
            guard case let .registered(id) = stage else { return answer(.notRegistered) }
            if type == .signal { signal(fields, from: id) } else { presence(fields, from: id) }
        }
    }

    /// `bad_message`: the socket is closed before registration and kept afterwards (§5.6).
    private func badMessage() {
        if case .registered = stage { answer(.badMessage) } else { end(with: .badMessage) }
    }

    /// §6.1 step 2, in order.
    private func register(_ fields: [String: JSONValue]) {
        let challenge: String, sentAt: UInt64
        switch stage {
        case .pending: return answer(.registrationPending)
        case .registered: return answer(.alreadyRegistered)
        case .closed: return
        case let .challenged(text, at): (challenge, sentAt) = (text, at)
        }
        guard let message = RegisterMessage.parse(fields) else { return end(with: .badMessage) }
        guard server.clock.monotonicMs() &- sentAt <= Self.challengeLifetimeMs else { return end(with: .challengeExpired) }
        cancelChallengeTimer()
        let transcript = SignalingTranscript.register(challenge: challenge, id: message.id)
        guard let key = try? Ed25519.PublicKey(rawRepresentation: message.id.key),
              key.isValidSignature(message.signature, for: transcript) else { return end(with: .badSignature) }
        guard server.directory.reserve(message.id, for: self) else { return end(with: .duplicateID) }
        signingKey = key
        stage = .pending(message.id)
        guard let cluster = server.cluster else { return issuance = server.issue(for: self, id: message.id) }
        // Across nodes the shared registry has the last word on a duplicate (§6.1 step 5).
        let confined = UncheckedTransfer(self)
        cluster.claim(message.id, on: loop) { claimed in confined.value.claimed(claimed, id: message.id) }
    }

    /// The registry's answer to this socket's claim: issuance goes on, or the registration ends
    /// `duplicate_id` (another node holds the ID) or `unavailable` (the registry did not answer).
    /// A socket gone meanwhile has already given the claim back (its release follows the claim
    /// on the same lane).
    private func claimed(_ claimed: Bool?, id: SignalingID) {
        guard case let .pending(pending) = stage, pending == id else { return }
        switch claimed {
        case true?: issuance = server.issue(for: self, id: id)
        case false?: end(with: .duplicateID)
        case nil: end(with: .unavailable)
        }
    }

    /// The issuance finished (§6.1 steps 8–9); a stale completion changes nothing.
    func issued(_ result: Result<Issued, IssuanceFailure>, id: SignalingID) {
        guard case let .pending(pending) = stage, pending == id else { return }
        issuance = nil
        switch result {
        case let .success(issued):
            guard server.directory.markRoutable(id, for: self) else { return end(with: .internal) }
            stage = .registered(id)
            server.metrics.registrations.increment()
            send(.registered(id: id, iceServers: issued.iceServers, iceExpiresAt: issued.expiresAt))
        case let .failure(failure):
            server.diagnostic("signal: credential issuance failed: \(failure)")
            end(with: .unavailable)
        }
    }

    /// §6.2, in order: shape, signature, rate, recipient.
    private func signal(_ fields: [String: JSONValue], from id: SignalingID) {
        let message: SignalMessage
        switch SignalMessage.parse(fields) {
        case let .failure(fault):
            server.metrics.signal(fault.kind, "bad_message")
            return answer(.badMessage, call: fault.call, kind: fault.kind)
        case let .success(parsed): message = parsed
        }
        guard message.from == id else {
            server.metrics.signal(message.kind, "bad_message")
            return answer(.badMessage, call: message.call, kind: message.kind)
        }
        guard let signingKey, signingKey.isValidSignature(message.signature, for: message.signedBytes) else {
            server.metrics.signal(message.kind, "bad_signature")
            return answer(.badSignature, call: message.call, kind: message.kind)
        }
        guard signalWindow.hit(now: server.clock.monotonicMs()) else {
            server.metrics.signal(message.kind, "rate_limited")
            return answer(.rateLimited, call: message.call, kind: message.kind)
        }
        guard let recipient = server.directory.routableSocket(message.to) else {
            if let cluster = server.cluster {
                // Another node may hold the ID: it answers `offline` back if not.
                server.metrics.signal(message.kind, "to_node")
                let confined = UncheckedTransfer(self), loop = self.loop
                return cluster.forward(message) { loop.execute { confined.value.recipientOffline(call: message.call, kind: message.kind) } }
            }
            server.metrics.signal(message.kind, "offline")
            return answer(.offline, call: message.call, kind: message.kind)
        }
        server.metrics.signal(message.kind, "forwarded")
        let text = Array(message.json().utf8)
        // The loop's queue keeps one sender's signals in order on the recipient's loop.
        if recipient.value.loop === loop { return recipient.value.deliver(text) }
        recipient.value.loop.execute { recipient.value.deliver(text) }
    }

    /// No node holds the recipient of a signal this socket sent (or it could not be reached).
    func recipientOffline(call: CallUUID, kind: SignalKind) {
        guard case .registered = stage else { return }
        server.metrics.signal(kind, "offline")
        answer(.offline, call: call, kind: kind)
    }

    /// A forwarded signal for this socket; past 1 MiB queued the socket goes (§6.2 step 5, §13.1).
    func deliver(_ text: [UInt8]) {
        guard case .registered = stage else { return }
        socket.send(text: text)
        if socket.connection.queuedBytes > Self.maxPendingOutbound { overflowed() }
    }

    /// §6.4's close for a socket over its pending-output limit: the signals it has not begun to
    /// receive are dropped, so its close frame follows whole frames when it reads again.
    private func overflowed() {
        leave()
        socket.close(code: WebSocketCloseCode.policyViolation, reason: SignalingErrorCode.rateLimited.rawValue, discardingUnsentOutput: true)
    }

    /// Output above the high-water mark for `stallTimeout`, whatever filled it (its own errors
    /// and pongs, unread): closed as an overflowing socket is.
    func webSocketDidStall(_ socket: WebSocketConnection) { overflowed() }

    private func presence(_ fields: [String: JSONValue], from id: SignalingID) {
        guard let query = PresenceQuery.parse(fields) else { return answer(.badMessage) }
        guard presenceWindow.hit(now: server.clock.monotonicMs()) else { return answer(.rateLimited) }
        server.metrics.presenceQueries.increment()
        let online = server.directory.isOnline(query.ids)
        guard let cluster = server.cluster else { return answerPresence(query.ids, online) }
        let confined = UncheckedTransfer(self)
        cluster.online(query.ids, local: online, on: loop, asker: id) { answer in confined.value.answerPresence(query.ids, answer) }
    }

    private func answerPresence(_ ids: [SignalingID], _ online: [Bool]) {
        guard case .registered = stage else { return }
        send(.presence(Array(zip(ids, online)).map { (id: $0.0, online: $0.1) }))
    }

    // MARK: Sending and ending

    private func send(_ message: SignalingServerMessage) {
        socket.send(text: Array(message.json().utf8))
    }

    /// An `error` that keeps the connection.
    private func answer(_ code: SignalingErrorCode, call: CallUUID? = nil, kind: SignalKind? = nil) {
        server.metrics.errors.labels(code.rawValue).increment()
        send(.error(code, call: call, kind: kind))
    }

    /// An `error`, then the close whose reason is its code (§5.6); the ID's presence and
    /// reservation go at once.
    func end(with code: SignalingErrorCode) {
        guard socket.isOpen else { return }
        answer(code)
        leave()
        socket.close(code: Self.closeCode(for: code), reason: code.rawValue)
    }

    static func closeCode(for code: SignalingErrorCode) -> UInt16 {
        switch code {
        case .unavailable: WebSocketCloseCode.tryAgainLater
        case .tooLarge: WebSocketCloseCode.messageTooBig
        case .internal: WebSocketCloseCode.internalError
        default: WebSocketCloseCode.policyViolation
        }
    }

    /// SIGTERM: 1001 `shutting_down`, no `error` first (§13.1).
    func shutDown() {
        guard socket.isOpen else { return }
        leave()
        socket.close(code: WebSocketCloseCode.goingAway, reason: "shutting_down")
    }

    /// Presence and reservation removed, issuance abandoned (§6.1 step 4): its completion, if
    /// any, finds the socket closed and is discarded.
    private func leave() {
        cancelChallengeTimer()
        issuance?.cancel()
        issuance = nil
        switch stage {
        case let .pending(id), let .registered(id):
            server.directory.release(id, for: self)
            server.cluster?.release(id)
        case .challenged, .closed: break
        }
        stage = .closed
    }

    private func cancelChallengeTimer() {
        if let challengeTimer { loop.cancel(challengeTimer) }
        challengeTimer = nil
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        leave()
        lease.release()
        server.closed(self)
    }

    func webSocketOversizeNotice(_ socket: WebSocketConnection) -> (text: [UInt8], reason: String)? {
        server.metrics.errors.labels(SignalingErrorCode.tooLarge.rawValue).increment()
        leave()
        return (Array(SignalingServerMessage.error(.tooLarge).json().utf8), SignalingErrorCode.tooLarge.rawValue)
    }
}
