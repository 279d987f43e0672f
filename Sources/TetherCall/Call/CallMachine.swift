public import TetherSync
public import TetherWire

/// The calls of one signed-in identity (signaling.md §7) as a pure state machine: user requests,
/// forwarded signals, media reports and time in; signed signals, media commands and notices out.
/// No I/O and no clock: the driver passes `now` with every event, sends `.tick` at
/// `nextDeadline`, and carries out the actions in order. It owns each call's `CallSecureChannel`
/// and runs it over the data channel.
///
/// At most one call exists at a time, in whatever phase; an `offer` from anyone else meanwhile is
/// answered `reject` `busy` and changes nothing (§7.2). Fails closed: a forwarded signal that
/// fails any check of §7.2 is dropped without effect (`droppedSignals` counts why), and a
/// violation by the peer or the media ends the call with `close` `error`.
///
/// The TURN credential margin (§7.5) is learned from `.registered(iceExpiresAt:)`, which the
/// driver passes on every registration; `.signalingLost` forgets it, so no call starts while
/// the machine cannot signal.
public struct CallMachine: Sendable {
    /// The identity whose calls these are.
    public let identity: CallIdentity
    /// The credentials' expiry (UNIX seconds) while registered; nil while signaling is down.
    var iceExpiresAt: Int64?
    var current: ActiveCall?
    /// The most recent ended calls, oldest first (`CallSetupLimits.endedCallMemory`).
    var endedCalls: [CallUUID] = []
    /// The actions of the event being handled.
    var outbox: [CallAction] = []
    /// Signals dropped since the machine began, by reason.
    public private(set) var droppedSignals: [CallSignalDrop: Int] = [:]
    /// The most recent drop's reason (for diagnostics; it names no peer).
    public private(set) var lastDroppedSignal: CallSignalDrop?

    /// A machine with no call, not yet registered.
    public init(identity: CallIdentity) {
        self.identity = identity
    }

    /// The current call, if any.
    public var call: CallSummary? { current?.summary }

    /// `call` is hanging up (or its data channel closed): it takes no new text.
    public func isEnding(_ call: CallUUID) -> Bool {
        guard let current, current.id == call else { return false }
        return current.hangingUp || current.mediaClosed || current.peerEnded != nil
    }

    /// How many more texts `sendText` queues for `call` now (0 without that call, or while it
    /// hangs up): an application holds its user's input back by this rather than be refused.
    public func sendCapacity(for call: CallUUID) -> Int {
        guard let current, current.id == call, !isEnding(call) else { return 0 }
        return CallSetupLimits.outgoingTexts - current.outgoing.count
    }

    /// Registered with the signaling server: signals can leave.
    public var isRegistered: Bool { iceExpiresAt != nil }

    /// The current call's secure channel, once its data channel opened (for its session ID,
    /// epoch and safety number).
    public var secureChannel: CallSecureChannel? { current?.channel }

    /// When `.tick` must next be handled: the setup deadline of §7.5 or
    /// the secure channel's next tick. Nil without a call.
    public var nextDeadline: MonotonicInstant? {
        guard let current else { return nil }
        return [current.deadline?.at, current.channel?.nextTick].compactMap(\.self).min()
    }

    /// Handles one event. Deadlines that passed by `now` are enforced first, so a late `.tick`
    /// never lets a signal in after its call timed out.
    public mutating func handle(_ event: CallEvent, now: CallTime) -> [CallAction] {
        outbox = []
        enforceDeadline(now: now)
        switch event {
        case let .dial(peer, call): dial(peer, call: call, now: now)
        case let .accept(call): accept(call, now: now)
        case let .decline(call): if current?.id == call, current?.phase == .invited { end(.declined) }
        case let .hangUp(call): if current?.id == call { hangUp(now: now) }
        case let .hangUpNow(call): if current?.id == call { end(current?.phase == .invited ? .declined : .hungUp) }
        case let .sendText(call, text, id, sentAt): sendText(text, id: id, sentAt: sentAt, call: call, now: now)
        case let .rotate(call): if current?.id == call { runChannel { try? $0.rotate(now: now.monotonic) } }
        case let .registered(expiresAt): iceExpiresAt = expiresAt
        case .signalingLost: signalingLost()
        case let .signalRefused(call, _, code): signalRefused(call: call, code: code)
        case let .signal(signal): receive(signal, now: now)
        case let .media(call, event): if current?.id == call, current?.hasMedia == true { media(event, now: now) }
        case .tick: runChannel { $0.tick(now: now.monotonic) }
        }
        // Whatever the event changed (a receipt, a released frame, a completed rotation, the
        // channel authenticated), the queue moves on, and a hang-up that waited may now end.
        sendQueued(now: now)
        startHangUpGraceIfSecured(now: now)
        if let call = current, call.hangingUp, !call.hasUndelivered { end(.hungUp) }
        if let call = current, let reason = call.peerEnded, call.channel?.awaitingReceiptCount ?? 0 == 0 { end(reason) }
        let actions = outbox
        outbox = []
        return actions
    }

    /// §7.5: the margin is checked whenever a call would start or be accepted.
    func credentialsAllowCall(at now: CallTime) -> Bool {
        guard let iceExpiresAt else { return false }
        return iceExpiresAt - now.wall.unixSeconds >= CallSetupLimits.credentialMarginSeconds
    }

    /// Signs and queues a signal for the current call's peer; false when signaling is down and
    /// nothing could leave.
    @discardableResult
    mutating func send(_ body: CallSignalBody, call: CallUUID, to peer: SignalingID) -> Bool {
        guard isRegistered else { return false }
        outbox.append(.sendSignal(identity.signal(body.kind, to: peer, call: call, body: body.base64)))
        return true
    }

    mutating func notify(_ notice: CallNotice) { outbox.append(.notify(notice)) }

    mutating func drop(_ reason: CallSignalDrop) {
        droppedSignals[reason, default: 0] += 1
        lastDroppedSignal = reason
    }

    /// A signal the call still needs did not reach the peer: without the server's `offline` the
    /// caller would ring for 45 s at nobody. Once past signaling (§7.3 step 4 done) the data
    /// channel carries the call, and a lost `close` is not worth ending it for. Other refusals
    /// (`rate_limited`, say) leave the call to its deadlines.
    private mutating func signalRefused(call: CallUUID, code: String) {
        guard code == SignalingErrorCode.offline.rawValue, let current, current.id == call, !current.isPastSignaling else { return }
        end(.peerOffline)
    }

    /// The call can do without signaling once every signal it needs was exchanged; before that
    /// it could never complete, so it ends now rather than at a timeout. A call whose data
    /// channel already closed waits for a `close` that can no longer come, so it ends too.
    private mutating func signalingLost() {
        iceExpiresAt = nil
        guard let current else { return }
        if current.mediaClosed { end(.mediaClosed) } else if !current.isPastSignaling { end(.signalingLost) }
    }
}
