import TetherCall
import TetherNet
import TetherWire
import TetherEncoding

/// Signals around a ring of registered clients: client i signals client i + 1, so each client
/// hears from exactly one sender and a forwarded signal needs no parsing to be matched — the
/// server keeps one sender's signals in order (§6.2 step 5), so it is the oldest one in flight
/// from the predecessor, and its bytes must equal what was sent (the server re-serialises the
/// eight fields in the order `SignalMessage.json()` writes them).
///
/// Every envelope is signed before the run (a few per sender, each with its own call UUID, used
/// in turn: the server does not reject replays), so the load generator never signs while it
/// measures. Touched only on the clients' loop.
final class Ring: @unchecked Sendable {
    /// The body of every signal: a JSON object of exactly 64 bytes.
    static let body: [UInt8] = {
        let text = #"{"pad":""# + String(repeating: "x", count: 54) + #""}"#
        precondition(text.utf8.count == 64)
        return Array(text.utf8)
    }()

    let clients: [BenchClient]
    let loop: EventLoop
    private let envelopes: [[[UInt8]]]
    private let calls: [[String]]
    private var nextEnvelope: [Int]
    private var inFlight: [InFlight]
    private var cursor = 0

    private(set) var sent = 0
    private(set) var delivered = 0
    private(set) var firstSentAt: UInt64 = 0
    private(set) var lastDeliveredAt: UInt64 = 0
    /// The longest wait between two deliveries inside the measured window (ns): long ones mean
    /// the server forwards in bursts.
    private(set) var longestGap: UInt64 = 0
    /// Forwarded signals whose bytes differed from the one expected, or that came with none in flight.
    private(set) var mismatched = 0
    private(set) var errors: [String: Int] = [:]
    /// Registered sockets the server closed during the run.
    private(set) var lost: [String: Int] = [:]
    /// Latencies (ns) of signals sent in `[recordFrom, recordUntil)`.
    private(set) var latencies: [UInt64] = []
    var recordFrom: UInt64 = .max
    var recordUntil: UInt64 = .max
    /// Open loop: how late each send was against its schedule (ns).
    private(set) var pacingLag: [UInt64] = []
    private var onCompleted: () -> Void = {}
    private var running = false

    var outstanding: Int { sent - delivered - errors.values.reduce(0, +) }

    init(_ clients: [BenchClient], envelopesPerSender: Int) {
        self.clients = clients
        loop = clients[0].loop
        let body = Base64.encode(Self.body)
        let count = clients.count
        var envelopes: [[[UInt8]]] = []
        var calls: [[String]] = []
        for (index, client) in clients.enumerated() {
            let to = clients[(index + 1) % count].identity.id
            let signed = (0..<max(1, envelopesPerSender)).map { _ in client.identity.signal(.candidate, to: to, call: .random(), body: body) }
            envelopes.append(signed.map { Array($0.json().utf8) })
            calls.append(signed.map(\.call.text))
        }
        self.envelopes = envelopes
        self.calls = calls
        nextEnvelope = Array(repeating: 0, count: count)
        inFlight = Array(repeating: InFlight(), count: count)
        latencies.reserveCapacity(1 << 18)
        for (index, client) in clients.enumerated() {
            client.onText = { [unowned self] text in received(text, by: index) }
            client.onClose = { [unowned self] code, reason in if running { lost["\(code) \(reason)", default: 0] += 1 } }
        }
    }

    /// Sends the next envelope of the next sender in turn, so the load is spread over them all.
    private func sendNext(now: UInt64) {
        let sender = cursor
        cursor = cursor + 1 == clients.count ? 0 : cursor + 1
        let envelope = nextEnvelope[sender]
        nextEnvelope[sender] = envelope + 1 == envelopes[sender].count ? 0 : envelope + 1
        inFlight[sender].push(envelope: envelope, sentAt: now)
        if sent == 0 { firstSentAt = now }
        sent += 1
        clients[sender].send(envelopes[sender][envelope])
    }

    private static let signalPrefix = Array(#"{"type":"signal""#.utf8)

    private func received(_ text: [UInt8], by index: Int) {
        let now = Measure.now()
        guard text.starts(with: Self.signalPrefix) else { return answered(text, by: index) }
        let sender = index == 0 ? clients.count - 1 : index - 1
        guard let (envelope, sentAt) = inFlight[sender].pop() else {
            mismatched += 1
            return
        }
        if text != envelopes[sender][envelope] { mismatched += 1 }
        delivered += 1
        if lastDeliveredAt != 0, now >= recordFrom, now < recordUntil { longestGap = max(longestGap, now &- lastDeliveredAt) }
        lastDeliveredAt = now
        if sentAt >= recordFrom, sentAt < recordUntil { latencies.append(now &- sentAt) }
        onCompleted()
    }

    /// Anything but a forwarded signal is an `error` answering one of this client's own sends
    /// (offline, rate_limited…): counted, and its envelope no longer in flight.
    private func answered(_ text: [UInt8], by index: Int) {
        guard case let .error(code, _, call, _)? = SignalingServerMessage.parse(text) else {
            errors["unparsed message", default: 0] += 1
            return
        }
        errors[code, default: 0] += 1
        if let call { inFlight[index].remove { calls[index][$0] == call.text } }
        onCompleted()
    }

    // MARK: Drivers (on the loop)

    /// Closed loop: `window` signals in flight, each completion sending the next.
    func startClosedLoop(window: Int) {
        running = true
        onCompleted = { [unowned self] in if running { sendNext(now: Measure.now()) } }
        let now = Measure.now()
        for _ in 0..<max(1, window) { sendNext(now: now) }
    }

    /// Open loop: `rate` signals per second on a schedule from now until `until`, whatever the
    /// server does with them. The loop's timers fire to the millisecond, so sends leave in
    /// bursts of rate/1000; each is timed when it is handed to its socket, and its lateness
    /// against the schedule is kept as `pacingLag`.
    func startOpenLoop(rate: Double, until: UInt64) {
        running = true
        onCompleted = {}
        let start = Measure.now()
        pacingLag.reserveCapacity(Int(rate * Measure.seconds(until &- start)) + 1024)
        var scheduled = 0
        func tick() {
            let now = Measure.now()
            let due = Int(Double(min(now, until) &- start) * rate / 1e9)
            while scheduled < due {
                let planned = start + UInt64(Double(scheduled) * 1e9 / rate)
                pacingLag.append(now &- planned)
                sendNext(now: now)
                scheduled += 1
            }
            if now < until { loop.schedule(after: .microseconds(200)) { tick() } }
        }
        tick()
    }

    func stop() {
        running = false
        onCompleted = {}
    }

    var errorJSON: JSON { .counts(errors) }
    var lostJSON: JSON { .counts(lost) }
}

/// One sender's signals in flight, oldest first: which envelope, and when it was sent.
struct InFlight {
    private var envelopes: [Int] = []
    private var sentAt: [UInt64] = []
    private var head = 0

    mutating func push(envelope: Int, sentAt time: UInt64) {
        // Drop the consumed prefix once it is most of the storage, so a long run stays small.
        if head > 64, head * 2 > envelopes.count {
            envelopes.removeFirst(head)
            sentAt.removeFirst(head)
            head = 0
        }
        envelopes.append(envelope)
        sentAt.append(time)
    }

    mutating func pop() -> (Int, UInt64)? {
        guard head < envelopes.count else { return nil }
        defer { head += 1 }
        return (envelopes[head], sentAt[head])
    }

    mutating func remove(where matches: (Int) -> Bool) {
        guard let index = envelopes[head...].firstIndex(where: matches) else { return }
        envelopes.remove(at: index)
        sentAt.remove(at: index)
    }
}
