import TetherCall
import TetherSync
import TetherWire

/// Alice's and Bob's `CallMachine`s wired back to back, on one manual clock. Signals one sends
/// reach the other (through `intercept`, if set); media commands drive a scripted transport per
/// side that answers the way a WebRTC peer connection would, in memory and synchronously: a
/// description and two candidates after `createOffer`/`acceptOffer`, the data channel open on
/// both sides once each has both descriptions and a remote candidate, each `send` one message
/// to the other side, a `close` a `channelClosed` at the peer. Everything waits in one FIFO
/// until `pump`, so tests can look between the steps and inject events of their own.
final class CallMachinePair {
    enum Side { case alice, bob }

    struct Media {
        var localDescription = false
        var remoteDescription = false
        var remoteCandidates: [CallCandidate] = []
        var isOpen = false
        var isClosed = false
    }

    static let carol = try! CallIdentity(stored: [UInt8](repeating: 0xC1, count: 32) + [UInt8](repeating: 0xC2, count: 32))

    var alice = CallMachine(identity: CallIdentityTests.alice())
    var bob = CallMachine(identity: CallIdentityTests.bob())
    var now = Fixture.start
    var unixSeconds: Int64 = 1_700_000_000
    var time: CallTime { CallTime(monotonic: now, wall: WallInstant(unixSeconds: unixSeconds)) }

    /// Every action each side produced, in order.
    private(set) var actions: [Side: [CallAction]] = [.alice: [], .bob: []]
    /// Signals addressed to neither Alice nor Bob (Carol's busy answers).
    private(set) var signalsToOthers: [SignalMessage] = []
    private var queue: [(Side, CallEvent)] = []
    private var media: [Side: [CallUUID: Media]] = [.alice: [:], .bob: [:]]

    /// Sees every signal on its way; nil drops it, another value replaces it.
    var intercept: ((SignalMessage) -> SignalMessage?)?
    /// False: the scripted ICE never connects, so no data channel opens.
    var connectivity = true
    /// Flips one bit of the next data-channel message Alice or Bob sends.
    var tamperNextFrame: Side?
    /// Data-channel messages this side sends vanish (a path that stopped delivering).
    var dropFramesFrom: Side?
    /// Data-channel messages (and the channel's close, which follows them in order) this side
    /// sends wait in `inFlight` until `deliverInFlight()`: signals overtake them, as a `close`
    /// through the server can overtake the data channel.
    var delayFramesFrom: Side?
    private var inFlight: [(Side, CallEvent)] = []

    init(iceLifetime: Int64 = 3_600) {
        handle(.registered(iceExpiresAt: unixSeconds + iceLifetime), on: .alice)
        handle(.registered(iceExpiresAt: unixSeconds + iceLifetime), on: .bob)
    }

    func identity(_ side: Side) -> CallIdentity { side == .alice ? alice.identity : bob.identity }
    func other(_ side: Side) -> Side { side == .alice ? .bob : .alice }
    func machine(_ side: Side) -> CallMachine { side == .alice ? alice : bob }

    /// Handles one event on `side` now and routes what comes out; returns those actions.
    @discardableResult
    func handle(_ event: CallEvent, on side: Side) -> [CallAction] {
        let produced = side == .alice ? alice.handle(event, now: time) : bob.handle(event, now: time)
        actions[side]!.append(contentsOf: produced)
        for action in produced { route(action, from: side) }
        return produced
    }

    /// Queues an event for `side`, behind what already waits.
    func enqueue(_ event: CallEvent, to side: Side) { queue.append((side, event)) }

    /// What `delayFramesFrom` held arrives now, in order, and is pumped.
    func deliverInFlight() {
        delayFramesFrom = nil
        queue.append(contentsOf: inFlight)
        inFlight = []
        pump()
    }

    /// Runs queued events in order until none is left.
    func pump() {
        var steps = 0
        while !queue.isEmpty {
            steps += 1
            precondition(steps < 100_000, "the pair does not settle")
            let (side, event) = queue.removeFirst()
            handle(event, on: side)
        }
    }

    /// Moves the clock, ticks both machines and pumps.
    func advance(by duration: Duration) {
        now += duration
        handle(.tick, on: .alice)
        handle(.tick, on: .bob)
        pump()
    }

    /// Moves the clock to `side`'s next deadline (plus `slack`) and ticks.
    func advanceToDeadline(of side: Side, slack: Duration = .zero) {
        guard let due = machine(side).nextDeadline else { return }
        advance(by: due.elapsed(since: now) + slack)
    }

    // MARK: The scripted media

    private func route(_ action: CallAction, from side: Side) {
        switch action {
        case let .sendSignal(signal):
            guard let signal = intercept.map({ $0(signal) }) ?? signal else { return }
            if signal.to == alice.identity.id { enqueue(.signal(signal), to: .alice) }
            else if signal.to == bob.identity.id { enqueue(.signal(signal), to: .bob) }
            else { signalsToOthers.append(signal) }
        case let .media(call, command): perform(command, call: call, on: side)
        case .notify: break
        }
    }

    private func perform(_ command: CallMediaCommand, call: CallUUID, on side: Side) {
        var state = media[side]![call] ?? Media()
        guard !state.isClosed else { return }
        switch command {
        case .createOffer:
            state.localDescription = true
            gather(call, on: side, sdp: "v=0\r\na=scripted-offer\r\n")
        case .acceptOffer:
            state.localDescription = true
            state.remoteDescription = true
            gather(call, on: side, sdp: "v=0\r\na=scripted-answer\r\n")
        case .setRemoteAnswer: state.remoteDescription = true
        case let .addRemoteCandidate(candidate):
            precondition(state.remoteDescription, "a candidate before the remote description")
            state.remoteCandidates.append(candidate)
        case var .send(frame):
            if tamperNextFrame == side {
                tamperNextFrame = nil
                frame[frame.count - 1] ^= 0x01
            }
            if state.isOpen, dropFramesFrom != side {
                if delayFramesFrom == side { inFlight.append((other(side), .media(call: call, .channelMessage(frame)))) }
                else { enqueue(.media(call: call, .channelMessage(frame)), to: other(side)) }
            }
        case .close:
            state.isClosed = true
            if media[other(side)]![call]?.isOpen == true {
                if delayFramesFrom == side { inFlight.append((other(side), .media(call: call, .channelClosed))) }
                else { enqueue(.media(call: call, .channelClosed), to: other(side)) }
            }
        }
        media[side]![call] = state
        openIfConnected(call)
    }

    private func gather(_ call: CallUUID, on side: Side, sdp: String) {
        enqueue(.media(call: call, .localDescription(sdp: sdp)), to: side)
        enqueue(.media(call: call, .localCandidate(CallCandidate(candidate: "candidate:1 1 udp 2122252543 192.0.2.\(side == .alice ? 1 : 2) 5000 typ host",
                                                                 sdpMid: "0", sdpMLineIndex: 0))), to: side)
        enqueue(.media(call: call, .localCandidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))), to: side)
    }

    private func openIfConnected(_ call: CallUUID) {
        guard connectivity, let a = media[.alice]![call], let b = media[.bob]![call] else { return }
        func ready(_ m: Media) -> Bool {
            m.localDescription && m.remoteDescription && !m.isOpen && !m.isClosed && m.remoteCandidates.contains { !$0.isEndOfCandidates }
        }
        guard ready(a), ready(b) else { return }
        media[.alice]![call]!.isOpen = true
        media[.bob]![call]!.isOpen = true
        enqueue(.media(call: call, .channelOpen), to: .alice)
        enqueue(.media(call: call, .channelOpen), to: .bob)
    }

    func mediaState(_ side: Side, _ call: CallUUID) -> Media? { media[side]![call] }

    // MARK: What came out

    func notices(_ side: Side) -> [CallNotice] {
        actions[side]!.compactMap { if case let .notify(notice) = $0 { notice } else { nil } }
    }

    func signals(_ side: Side) -> [SignalMessage] {
        actions[side]!.compactMap { if case let .sendSignal(signal) = $0 { signal } else { nil } }
    }

    func commands(_ side: Side) -> [CallMediaCommand] {
        actions[side]!.compactMap { if case let .media(_, command) = $0 { command } else { nil } }
    }

    func ended(_ side: Side) -> [CallEndReason] {
        notices(side).compactMap { if case let .ended(_, reason) = $0 { reason } else { nil } }
    }

    func texts(_ side: Side) -> [String] {
        notices(side).compactMap { if case let .message(_, .text(_, text, _)) = $0 { text } else { nil } }
    }

    func receipts(_ side: Side) -> [MessageID] {
        notices(side).compactMap { if case let .message(_, .receipt(id)) = $0 { id } else { nil } }
    }

    /// Forgets what came out so far (what waits in the queue stays).
    func clearRecords() { actions = [.alice: [], .bob: []] }

    // MARK: Scenarios

    /// Alice rings Bob; Bob is shown the invitation `latency` later.
    func ring(_ call: CallUUID = Fixture.callID, latency: Duration = .zero) {
        handle(.dial(peer: bob.identity.id, call: call), on: .alice)
        now += latency
        pump()
    }

    /// Alice rings Bob, Bob accepts, and everything runs to key confirmation.
    func connect(_ call: CallUUID = Fixture.callID) {
        ring(call)
        handle(.accept(call: call), on: .bob)
        pump()
    }

    /// Drops Bob's `channel` on its way, so Alice never starts the handshake.
    func loseCalleesChannel() {
        intercept = { $0.kind == .channel && $0.from == Fixture.bob ? nil : $0 }
    }

    /// A text from `side` reaches the other side: the call still carries chat.
    func chatFlows(from side: Side) -> Bool {
        let text = "still talking \(MessageID.random())"
        send(text, from: side)
        pump()
        return texts(other(side)).last == text
    }

    /// Types `texts` on `side` as an application reading input through the send capacity does
    /// (`CallAgent.queue`): each waits for room, time passes to each deadline, and it returns
    /// once every text left and both pacers are empty (or the call ended). The ids, in order.
    @discardableResult
    func type(_ texts: [String], from side: Side, call: CallUUID = Fixture.callID) -> [MessageID] {
        var ids: [MessageID] = []
        var next = texts.startIndex
        var steps = 0
        while machine(side).call != nil {
            steps += 1
            precondition(steps < 1_000_000, "the texts do not drain")
            while next < texts.endIndex, machine(side).sendCapacity(for: call) > 0 {
                ids.append(send(texts[next], from: side, call: call))
                next += 1
            }
            pump()
            let queued = machine(side).sendCapacity(for: call) < CallSetupLimits.outgoingTexts
            let paced = [Side.alice, .bob].first { machine($0).secureChannel?.pacedFrameCount ?? 0 > 0 }
            guard next < texts.endIndex || queued || paced != nil else { break }
            advanceToDeadline(of: paced ?? side)
        }
        return ids
    }

    @discardableResult
    func send(_ text: String, from side: Side, call: CallUUID = Fixture.callID, id: MessageID = .random()) -> MessageID {
        handle(.sendText(call: call, text: text, id: id, sentAt: 1_700_000_000_000), on: side)
        return id
    }
}

extension CallMachinePair.Media: Equatable {}

extension CallIdentity {
    /// A signal from this identity carrying `body`, signed as a peer would.
    func signal(_ body: CallSignalBody, to: SignalingID, call: CallUUID = Fixture.callID) -> SignalMessage {
        signal(body.kind, to: to, call: call, body: body.base64)
    }

    /// The offer or answer body a peer with this identity sends.
    func description(sdp: String = "v=0\r\n") -> CallSignalBody.Description {
        CallSignalBody.Description(sdp: sdp, agreementKey: agreementPublicKey, identitySignature: identitySignature)
    }
}
