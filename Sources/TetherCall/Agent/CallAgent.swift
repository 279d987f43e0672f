public import TetherSync
public import TetherNet
public import TetherWire
import Glibc

/// An identity's calls, running: a `SignalingClient` for the signals, a `CallMachine` for the
/// rules of signaling.md §7, and one media transport per call, on one event loop. The machine
/// decides; the agent only carries out its actions in order (signals out, media commands, notices
/// to the application) and feeds it everything that happens, with the time, and a tick at its
/// next deadline.
///
/// Confined to `loop`: the handler is called there, and the public methods hop onto it. Media
/// transports report from threads of their own (libnice's, usrsctp's, a test queue); their
/// events are carried onto the loop, and the events of a transport whose call has ended are
/// dropped there by the machine.
public final class CallAgent: Sendable {
    /// What the agent reports to the application, on its loop.
    public enum Event: Sendable {
        /// Registered with the signaling server: calls can be made and received.
        case online(SignalingRegistration)
        /// The signaling connection ended; `retryIn` seconds until the next attempt (nil: stopped).
        case offline(SignalingFailure, retryIn: Duration?)
        /// Something about a call (an invitation, its security, a message, its end…).
        case call(CallNotice)
        /// The server refused a signal: an `offline` peer ends the ringing call at once.
        case signalRefused(SignalingRefusal)
    }

    /// Makes a call's media transport, with the ICE servers of the current registration.
    public typealias MediaFactory = @Sendable (_ call: CallUUID, _ iceServers: [ICEServer]) -> any CallMediaTransport

    /// The loop the agent, its signaling client and its machine run on.
    public let loop: EventLoop
    /// The connection to the signaling server (for presence queries).
    public let signaling: SignalingClient
    private let makeMedia: MediaFactory
    private let wallClock: @Sendable () -> WallInstant
    private let onEvent: @Sendable (Event) -> Void

    // Everything that changes lives on `loop`, asserted at each access.
    private struct State {
        var machine: CallMachine
        var transports: [CallUUID: (transport: any CallMediaTransport, reports: MediaReports)] = [:]
        var iceServers: [ICEServer] = []
        var tickTimer: EventLoop.TimerID?
        var tickDue: MonotonicInstant?
        /// Texts waiting for room in their call's queue (`queue(_:on:)`), in order; at most
        /// `CallSetupLimits.outgoingTexts`, one suspended caller each.
        var waitingTexts: [WaitingText] = []
        /// An event's actions are being carried out: the application's handler may be running
        /// inside them.
        var handling = false
    }

    private struct WaitingText {
        let call: CallUUID
        let text: String
        let id: MessageID
        let sentAt: Int64
        let continuation: CheckedContinuation<Result<MessageID, CallSendError>, Never>
    }

    private let state: LoopBound<State>

    private var machine: CallMachine {
        get { state.value.machine }
        _modify { yield &state.value.machine }
    }
    private var transports: [CallUUID: (transport: any CallMediaTransport, reports: MediaReports)] {
        get { state.value.transports }
        _modify { yield &state.value.transports }
    }
    private var iceServers: [ICEServer] {
        get { state.value.iceServers }
        _modify { yield &state.value.iceServers }
    }
    private var tickTimer: EventLoop.TimerID? {
        get { state.value.tickTimer }
        _modify { yield &state.value.tickTimer }
    }
    private var tickDue: MonotonicInstant? {
        get { state.value.tickDue }
        _modify { yield &state.value.tickDue }
    }

    /// - Parameters:
    ///   - identity: whose calls these are (`IdentityStore.loadOrCreate()`).
    ///   - endpoint: the signaling server.
    ///   - loop: the loop the agent runs on; its handler is called there.
    ///   - tls: the trust for `wss://` (default: the system roots).
    ///   - media: makes each call's media transport, given the registration's ICE servers.
    ///   - wallClock: the wall clock, read only for the TURN credential margin (§7.5) and a
    ///     text's `sentAt`.
    ///   - onEvent: the application's handler, on `loop`. It may call the agent back: such a
    ///     call runs once the current event's actions are done.
    public init(identity: CallIdentity, endpoint: SignalingEndpoint, loop: EventLoop, tls: TLSClientContext? = nil, media: @escaping MediaFactory,
                wallClock: (@Sendable () -> WallInstant)? = nil,
                onEvent: @escaping @Sendable (Event) -> Void) throws(NetError) {
        self.loop = loop
        self.makeMedia = media
        self.wallClock = wallClock ?? { .now() }
        self.onEvent = onEvent
        self.identity = identity
        state = LoopBound(State(machine: CallMachine(identity: identity)), loop: loop)
        let box = WeakAgent()
        signaling = try SignalingClient(endpoint: endpoint, identity: identity, loop: loop, tls: tls) { event in box.agent?.signalingEvent(event) }
        box.agent = self
    }

    /// The identity whose calls these are.
    public let identity: CallIdentity

    /// Connects to the signaling server; `.online` follows once registered.
    public func start() { signaling.start() }

    /// Hangs up the current call at once and leaves the signaling server.
    public func stop() {
        onLoop { agent in
            if let call = agent.machine.call?.call { agent.handle(.hangUpNow(call: call)) }
            agent.signaling.stop()
            if let timer = agent.tickTimer { agent.loop.cancel(timer) }
            agent.tickTimer = nil
            agent.tickDue = nil
        }
    }

    /// Calls `peer`; the call's id names it in every notice.
    @discardableResult
    public func dial(_ peer: SignalingID) -> CallUUID {
        let call = CallUUID.random()
        onLoop { $0.handle(.dial(peer: peer, call: call)) }
        return call
    }

    /// Consents to the invitation of `call` (§7.3 step 2).
    public func accept(_ call: CallUUID) { onLoop { $0.handle(.accept(call: call)) } }
    /// Refuses the invitation of `call`: `reject` `declined`.
    public func decline(_ call: CallUUID) { onLoop { $0.handle(.decline(call: call)) } }
    /// Hangs up as a person means it: what was accepted leaves and is receipted first (at most
    /// `CallSetupLimits.hangUpGrace`), then `close`; see `CallEvent.hangUp`.
    public func hangUp(_ call: CallUUID) { onLoop { $0.handle(.hangUp(call: call)) } }
    /// Hangs up now, whatever is in flight (each such text is reported `undelivered`).
    public func hangUpNow(_ call: CallUUID) { onLoop { $0.handle(.hangUpNow(call: call)) } }
    /// Asks for fresh keys on `call` now (§10); `.rotated` follows.
    public func rotate(_ call: CallUUID) { onLoop { $0.handle(.rotate(call: call)) } }

    /// Queues a text on the call; it leaves on the secure channel as soon as the channel takes
    /// it, and its receipt comes back as a `.message` notice. Refused (a `sendRefused` notice)
    /// when the call's queue is full: `queue(_:on:)` waits for room instead.
    @discardableResult
    public func send(_ text: String, on call: CallUUID) -> MessageID {
        let id = MessageID.random()
        let sentAt = Int64(wallClock().unixMilliseconds)
        onLoop { $0.handle(.sendText(call: call, text: text, id: id, sentAt: sentAt)) }
        return id
    }

    /// Queues a text on the call, waiting (suspended) while the call's queue is full, so input
    /// read through this is read only as fast as the channel sends it: a pasted burst of any
    /// size goes out in order at the paced rate. Typed before `secured`, it waits for it.
    /// Throws when the call is over or ending, when the text breaks a payload limit, or when
    /// `CallSetupLimits.outgoingTexts` other texts already wait for room.
    public func queue(_ text: String, on call: CallUUID) async throws(CallSendError) -> MessageID {
        let id = MessageID.random()
        let sentAt = Int64(wallClock().unixMilliseconds)
        if let problem = CallPayload.text(id: id, text: text, sentAt: sentAt).sendingProblem { throw .invalidPayload(problem) }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<MessageID, CallSendError>, Never>) in
            onLoop { agent in
                guard agent.state.value.waitingTexts.count < CallSetupLimits.outgoingTexts else { return continuation.resume(returning: .failure(.queueFull)) }
                agent.state.value.waitingTexts.append(WaitingText(call: call, text: text, id: id, sentAt: sentAt, continuation: continuation))
                agent.admitWaitingTexts()
            }
        }
        return try result.get()
    }

    /// How many more texts the call's queue takes now (`CallMachine.sendCapacity(for:)`): an
    /// interface can grey out its send button at 0 rather than have `send` refused.
    public func sendCapacity(on call: CallUUID) async -> Int {
        await withCheckedContinuation { continuation in onLoop { continuation.resume(returning: $0.machine.sendCapacity(for: call)) } }
    }

    /// The machine's current call, read on the loop.
    public func currentCall() async -> CallSummary? {
        await withCheckedContinuation { continuation in onLoop { continuation.resume(returning: $0.machine.call) } }
    }

    /// Runs `body` with the machine on the loop (tests read counters such as `droppedSignals`).
    public func inspect<T: Sendable>(_ body: @escaping @Sendable (CallMachine) -> T) async -> T {
        await withCheckedContinuation { continuation in onLoop { continuation.resume(returning: body($0.machine)) } }
    }

    // MARK: Driving the machine

    /// Runs `body` on the loop: at once when called there between events, after the current
    /// event when called from inside one (an application answering a text from its event
    /// handler). Run at once, a text sealed from the handler would leave ahead of the frames the
    /// event had already sealed (its receipt), and the peer would fail the channel on the nonce.
    private func onLoop(_ body: @escaping (CallAgent) -> Void) {
        let transfer = UncheckedTransfer(body)
        if loop.inEventLoop, !state.value.handling { body(self) } else { loop.execute { [self] in transfer.value(self) } }
    }

    private var now: CallTime { CallTime(monotonic: loop.clock.now(), wall: wallClock()) }

    private func handle(_ event: CallEvent) {
        loop.assertInEventLoop()
        let outer = state.value.handling
        state.value.handling = true
        defer { state.value.handling = outer }
        let actions = machine.handle(event, now: now)
        for action in actions { perform(action) }
        rescheduleTick()
        admitWaitingTexts()
    }

    /// Texts waiting for room move into their call's queue, in order, while it has room; a
    /// text for a call that is over or ending is refused.
    private func admitWaitingTexts() {
        while let next = state.value.waitingTexts.first {
            let room = machine.sendCapacity(for: next.call)
            if room == 0, machine.call?.call == next.call, !machine.isEnding(next.call) { return }
            state.value.waitingTexts.removeFirst()
            guard room > 0 else {
                next.continuation.resume(returning: .failure(machine.call?.call == next.call ? .ending : .closed))
                continue
            }
            let actions = machine.handle(.sendText(call: next.call, text: next.text, id: next.id, sentAt: next.sentAt), now: now)
            for action in actions { perform(action) }
            rescheduleTick()
            next.continuation.resume(returning: .success(next.id))
        }
    }

    private func perform(_ action: CallAction) {
        switch action {
        case let .sendSignal(signal):
            signaling.send(signal)
        case let .media(call, command):
            switch command {
            case .createOffer, .acceptOffer:
                let transport = makeMedia(call, iceServers)
                let reports = MediaReports(call: call, agent: self)
                transport.delegate = reports
                transports[call] = (transport, reports)
            default:
                break
            }
            transports[call]?.transport.perform(command)
            if command == .close { transports[call] = nil }
        case let .notify(notice):
            onEvent(.call(notice))
        }
    }

    /// One timer, always at the machine's next deadline.
    private func rescheduleTick() {
        let due = machine.nextDeadline
        guard due != tickDue else { return }
        if let timer = tickTimer { loop.cancel(timer) }
        tickTimer = nil
        tickDue = due
        guard let due else { return }
        let current = loop.clock.now()
        tickTimer = loop.schedule(after: due.elapsed(since: current)) { [weak self] in
            guard let self else { return }
            self.tickTimer = nil
            self.tickDue = nil
            self.handle(.tick)
        }
    }

    fileprivate func mediaReported(_ event: CallMediaEvent, call: CallUUID) { handle(.media(call: call, event)) }

    fileprivate func signalingEvent(_ event: SignalingClient.Event) {
        loop.assertInEventLoop()
        switch event {
        case let .registered(registration):
            iceServers = registration.iceServers
            handle(.registered(iceExpiresAt: registration.iceExpiresAt))
            onEvent(.online(registration))
        case let .signal(signal):
            handle(.signal(signal))
        case let .signalRefused(refusal):
            if let call = refusal.call, let kind = refusal.kind { handle(.signalRefused(call: call, kind: kind, code: refusal.code)) }
            onEvent(.signalRefused(refusal))
        case let .disconnected(failure, retryIn):
            handle(.signalingLost)
            onEvent(.offline(failure, retryIn: retryIn))
        }
    }
}

/// A call's media reports, carried onto the agent's loop and tagged with the call; the machine
/// ignores those of a call that has ended.
private final class MediaReports: CallMediaTransportDelegate, Sendable {
    let call: CallUUID
    let loop: EventLoop
    weak let agent: CallAgent?

    init(call: CallUUID, agent: CallAgent) {
        self.call = call
        loop = agent.loop
        self.agent = agent
    }

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        let call = self.call
        loop.execute { [weak self] in self?.agent?.mediaReported(event, call: call) }
    }
}

/// The agent, held weakly by what outlives it (its signaling client's handler, media transports).
private final class WeakAgent: Sendable {
    private struct Reference {
        weak var agent: CallAgent?
    }

    // Set once, after the agent's init made the client that reports through it.
    private let reference = Locked(Reference())

    var agent: CallAgent? {
        get { reference.withLock { $0.agent } }
        set { reference.withLock { $0.agent = newValue } }
    }
}
