import TetherSync
import TetherCrypto
import TetherEncoding
import TetherService
import TetherWire

/// One `/signal` connection's rules (signaling.md §5, §6): challenged → pending → registered,
/// every answer and close of §5.6 in the order of §6.1 and §6.2, as a pure state machine. Events
/// and the monotonic time come in, actions go out; the host (`SignalSocket`) owns the WebSocket,
/// the timer, the clock and the calls to the directory, the cluster and the issuer, so every rule
/// here is tested on an injected clock without a socket.
///
/// Time is monotonic milliseconds, the clock the signaling server reads
/// (`ServiceClock.monotonicMs`); a wall-clock step never expires a challenge or reopens a window.
struct SignalSocketMachine {
    /// §4, §6.4: larger messages never reach the machine; the transport closes them (`tooLarge`).
    static let maxMessageBytes = 65_536
    /// §5.1 [DOC].
    static let challengeLifetime: Duration = .seconds(10)
    /// §6.4: pending outbound bytes beyond what the kernel took.
    static let maxPendingOutbound = 1 << 20
    static let rateWindow: Duration = .seconds(10)
    static let presencePerWindow = 10

    struct Configuration: Sendable, Equatable {
        /// §6.4's 50 per window unless `SIGNAL_SIGNAL_RATE_LIMIT` says otherwise (0 never refuses).
        var signalRateLimit = 50
        /// Several nodes share a registry (`SIGNAL_DB`): claims, forwards and presence cross nodes.
        var clustered = false
    }

    enum Stage: Equatable {
        /// Before the challenge is sent, and once the connection has ended: nothing is answered.
        case closed
        case challenged(challenge: String, sentAt: MonotonicInstant)
        /// The ID is reserved here (or being reserved) but not routable (§6.1 step 6).
        case pending(SignalingID, Registration)
        case registered(SignalingID)
    }

    /// Which answer a pending registration waits for. What leaving must undo follows from it:
    /// a reservation refused was never held, and only an issuance in flight can be abandoned.
    enum Registration: Equatable {
        case reserving
        case claiming
        case issuing
        /// The issuance answered; the ID is being made routable.
        case issued
    }

    let configuration: Configuration
    // Internal rather than private: the machine's rules live in one extension file per section.
    var stage: Stage = .closed
    var signalWindow: FixedWindow
    var presenceWindow = FixedWindow(limit: SignalSocketMachine.presencePerWindow, window: SignalSocketMachine.rateWindow)
    /// The registered ID's key, kept from its registration's verify: every signal's `from` must
    /// be that ID (§6.2 step 1), so each signal is verified with it as it stands.
    var signingKey: Ed25519.PublicKey?

    init(configuration: Configuration) {
        self.configuration = configuration
        signalWindow = FixedWindow(limit: configuration.signalRateLimit, window: Self.rateWindow)
    }

    /// True once `registered` was sent and until the connection ends (§5.5's "routable"):
    /// only then is a forwarded signal delivered to it.
    var isRoutable: Bool {
        if case .registered = stage { return true }
        return false
    }

    // MARK: Events

    /// The upgrade completed at `now`: the challenge goes out at once (§5.1, §6.1 step 1).
    /// `challenge` is 32 fresh random bytes.
    mutating func open(challenge: [UInt8], now: MonotonicInstant) -> [SignalSocketAction] {
        let text = Base64.encode(challenge)
        stage = .challenged(challenge: text, sentAt: now)
        return [.send(.challenge(text))]
    }

    /// A text frame's message.
    mutating func received(text: [UInt8], now: MonotonicInstant) -> [SignalSocketAction] {
        if case .closed = stage { return [] }
        guard let (type, fields) = SignalingClientMessage.classify(text) else { return badMessage() }
        switch type {
        case .register:
            return register(fields, now: now)
        case .signal, .presence:
            // §13.1: before the ID is routable, other fields go unchecked.
            guard case let .registered(id) = stage else { return answer(.notRegistered) }
            return type == .signal ? signal(fields, from: id, now: now) : presence(fields, from: id, now: now)
        }
    }

    /// §4: a binary frame's payload is read as UTF-8 text; invalid UTF-8 is a `bad_message`.
    mutating func received(binary: [UInt8], now: MonotonicInstant) -> [SignalSocketAction] {
        if case .closed = stage { return [] }
        guard String(validating: binary, as: UTF8.self) != nil else { return badMessage() }
        return received(text: binary, now: now)
    }

    // MARK: Deadline

    /// When the challenge's lifetime is over, while no `register` has passed §6.1 step 3: the
    /// host arms one timer for it and calls `tick` then. At that very millisecond a `register`
    /// is still in time (step 2.3 refuses one *more* than 10 s late); whichever of the two
    /// reaches the machine first decides.
    var nextDeadline: MonotonicInstant? {
        guard case let .challenged(_, sentAt) = stage else { return nil }
        return sentAt + Self.challengeLifetime
    }

    /// §6.1 step 3: no `register` within the lifetime → `challenge_expired`, close.
    mutating func tick(now: MonotonicInstant) -> [SignalSocketAction] {
        guard let deadline = nextDeadline, now >= deadline else { return [] }
        return end(.challengeExpired)
    }
}
