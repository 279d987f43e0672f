import TetherCall
import TetherSync

/// Alice (the caller) and Bob over an ordered in-memory link, sharing one manual clock. Frames
/// wait on the link until `pump` carries them, so tests choose how the two directions interleave.
final class ChannelPair {
    enum Side { case alice, bob }

    var alice: CallSecureChannel
    var bob: CallSecureChannel
    var now: MonotonicInstant
    private(set) var toAlice: [[UInt8]] = []
    private(set) var toBob: [[UInt8]] = []
    /// Everything but frames, per side, in order.
    private(set) var aliceEvents: [CallChannelAction] = []
    private(set) var bobEvents: [CallChannelAction] = []
    /// Frames each side put on the link.
    private(set) var framesFromAlice = 0
    private(set) var framesFromBob = 0

    init(now: MonotonicInstant = Fixture.start, alice: CallSecureChannel? = nil, bob: CallSecureChannel? = nil) {
        self.now = now
        self.alice = alice ?? Fixture.channel(.initiator, now: now)
        self.bob = bob ?? Fixture.channel(.responder, now: now)
    }

    func absorb(_ actions: [CallChannelAction], from side: Side) {
        for action in actions {
            switch (action, side) {
            case let (.send(frame), .alice): toBob.append(frame); framesFromAlice += 1
            case let (.send(frame), .bob): toAlice.append(frame); framesFromBob += 1
            case (_, .alice): aliceEvents.append(action)
            case (_, .bob): bobEvents.append(action)
            }
        }
    }

    func events(_ side: Side) -> [CallChannelAction] { side == .alice ? aliceEvents : bobEvents }

    func deliveries(_ side: Side) -> [CallPayload] { events(side).deliveries }

    func texts(_ side: Side) -> [String] {
        deliveries(side).compactMap { if case let .text(_, text, _) = $0 { text } else { nil } }
    }

    func receipts(_ side: Side) -> [MessageID] {
        deliveries(side).compactMap { if case let .receipt(id) = $0 { id } else { nil } }
    }

    func rotations(_ side: Side) -> [Int] {
        events(side).compactMap { if case let .rotated(epoch) = $0 { epoch } else { nil } }
    }

    func failure(_ side: Side) -> CallChannelFailure? { events(side).failure }

    /// Carries one frame to Alice (if any waits), then one to Bob, until the link is empty.
    func pump() {
        while !toAlice.isEmpty || !toBob.isEmpty {
            if !toAlice.isEmpty { absorb(alice.receive(toAlice.removeFirst(), now: now), from: .alice) }
            if !toBob.isEmpty { absorb(bob.receive(toBob.removeFirst(), now: now), from: .bob) }
        }
    }

    /// Carries only the frames already on the way to `side`.
    func deliverPending(to side: Side) {
        if side == .alice {
            let frames = toAlice
            toAlice = []
            for frame in frames { absorb(alice.receive(frame, now: now), from: .alice) }
        } else {
            let frames = toBob
            toBob = []
            for frame in frames { absorb(bob.receive(frame, now: now), from: .bob) }
        }
    }

    func advance(by duration: Duration) {
        now += duration
        absorb(alice.tick(now: now), from: .alice)
        absorb(bob.tick(now: now), from: .bob)
    }

    /// Pumps, and moves the clock to each paced release until nothing waits anywhere.
    func settle() {
        pump()
        while alice.pacedFrameCount > 0 || bob.pacedFrameCount > 0 {
            let due = [alice, bob].filter { $0.pacedFrameCount > 0 }.compactMap(\.nextTick).min()!
            advance(by: due.elapsed(since: now))
            pump()
        }
    }

    func connect() {
        absorb(alice.start(now: now), from: .alice)
        pump()
    }

    @discardableResult
    func send(_ text: String, from side: Side, id: MessageID = .random(), sentAt: Int64 = 1_700_000_000_000) throws -> MessageID {
        if side == .alice {
            absorb(try alice.sendText(text, id: id, sentAt: sentAt, now: now), from: .alice)
        } else {
            absorb(try bob.sendText(text, id: id, sentAt: sentAt, now: now), from: .bob)
        }
        return id
    }

    func rotate(_ side: Side) throws {
        if side == .alice {
            absorb(try alice.rotate(now: now), from: .alice)
        } else {
            absorb(try bob.rotate(now: now), from: .bob)
        }
    }
}
