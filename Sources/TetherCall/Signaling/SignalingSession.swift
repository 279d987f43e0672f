import TetherWire

/// One signaling connection's protocol as the client speaks it (signaling.md §5, §6.1): the
/// challenge answered once, the registration awaited, then signals and presence answers. Pure:
/// server messages in, things to send and to report out; the socket, timers and reconnects are
/// `SignalingClient`'s.
struct SignalingSession {
    enum State: Equatable {
        case awaitingChallenge
        case registering
        case registered
        /// The server ended the registration, or spoke something that is not the protocol.
        case ended
    }

    enum Output: Equatable {
        /// A text message to send.
        case send(String)
        case registered(SignalingRegistration)
        case signal(SignalMessage)
        /// The answer to the oldest presence query still waiting.
        case presence([(id: SignalingID, online: Bool)])
        /// A presence query the server refused (`rate_limited`, `bad_message`…).
        case presenceRefused(SignalingRefusal)
        /// The server refused a signal this client sent (`offline`, `rate_limited`…).
        case signalRefused(SignalingRefusal)
        /// The session is over: close the socket; the failure says whether to try again.
        case fail(SignalingFailure)

        static func == (lhs: Output, rhs: Output) -> Bool {
            switch (lhs, rhs) {
            case let (.send(a), .send(b)): a == b
            case let (.registered(a), .registered(b)): a == b
            case let (.signal(a), .signal(b)): a == b
            case let (.presence(a), .presence(b)): a.map(\.id) == b.map(\.id) && a.map(\.online) == b.map(\.online)
            case let (.presenceRefused(a), .presenceRefused(b)), let (.signalRefused(a), .signalRefused(b)): a == b
            case let (.fail(a), .fail(b)): a == b
            default: false
            }
        }
    }

    let identity: CallIdentity
    private(set) var state = State.awaitingChallenge
    /// Presence queries sent and not answered: the server answers in order, and a refusal of one
    /// carries no `call`, which is how it is told from a refused signal.
    private(set) var pendingPresence = 0
    /// The last error the server sent before registering: it explains the close that follows.
    private(set) var lastError: SignalingRefusal?

    init(identity: CallIdentity) { self.identity = identity }

    var isRegistered: Bool { state == .registered }

    mutating func receive(_ bytes: [UInt8]) -> [Output] {
        guard state != .ended else { return [] }
        guard let message = SignalingServerMessage.parse(bytes) else {
            return end(.protocolViolation("the server sent a message that is not signaling v2"))
        }
        switch (state, message) {
        case let (.awaitingChallenge, .challenge(challenge)):
            state = .registering
            return [.send(identity.register(challenge: challenge).json())]
        case let (.registering, .registered(id, servers, expiresAt)):
            guard id == identity.id else { return end(.protocolViolation("the server registered another ID")) }
            state = .registered
            return [.registered(SignalingRegistration(id: id, iceServers: servers, iceExpiresAt: expiresAt))]
        case let (.registered, .signal(signal)):
            // Envelopes for someone else are dropped here already; every other check of §7.2
            // (signature, peer, call, body) is the call machine's.
            guard signal.to == identity.id else { return [] }
            return [.signal(signal)]
        case let (.registered, .presence(answers)):
            guard pendingPresence > 0 else { return [] }
            pendingPresence -= 1
            return [.presence(answers)]
        case let (_, .error(code, text, call, kind)):
            let refusal = SignalingRefusal(code: code, message: text, call: call, kind: kind)
            guard state == .registered else {
                // Before registration every error but a harmless repeat is followed by the
                // server's close; what it said becomes the close's explanation.
                lastError = refusal
                return []
            }
            if call == nil, pendingPresence > 0 {
                pendingPresence -= 1
                return [.presenceRefused(refusal)]
            }
            return [.signalRefused(refusal)]
        default:
            return end(.protocolViolation("unexpected \(message.typeName) message"))
        }
    }

    /// A presence query to send now; nil when not registered (the server would say `not_registered`).
    mutating func presence(_ ids: [SignalingID]) -> String? {
        guard state == .registered else { return nil }
        pendingPresence += 1
        return PresenceQuery(ids: ids).json()
    }

    /// What the socket's close means, given what the server said before it.
    func failure(closeCode code: UInt16, reason: String) -> SignalingFailure {
        SignalingFailure(closeCode: code, reason: reason, error: lastError, registered: state == .registered)
    }

    private mutating func end(_ failure: SignalingFailure) -> [Output] {
        state = .ended
        return [.fail(failure)]
    }
}

extension SignalingServerMessage {
    var typeName: String {
        switch self {
        case .challenge: "challenge"
        case .registered: "registered"
        case .signal: "signal"
        case .presence: "presence"
        case .error: "error"
        }
    }
}
