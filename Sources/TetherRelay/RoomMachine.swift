public import TetherStore
public import TetherWire
import TetherCrypto
public import TetherSync
public import TetherService
public import TetherEncoding

/// A connection's identity inside a room; assigned by the I/O layer in connect order.
public struct SocketID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The number the I/O layer assigned.
    public let raw: UInt64
    /// The socket numbered `raw`.
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: SocketID, b: SocketID) -> Bool { a.raw < b.raw }
    public var description: String { "#\(raw)" }
}

/// What a room asks its I/O layer to do, in order.
public enum RoomAction: Equatable, Sendable {
    /// Send a control message as a text frame.
    case send(SocketID, String)
    /// Forward the frame being handled, unchanged, to this socket.
    case forward(to: SocketID)
    /// Forward a frame that waited behind a storage answer (sent by `from` before it was admitted,
    /// now spliced data, §6.9), unchanged, to this socket.
    case deliver(from: SocketID, to: SocketID, isText: Bool, payload: [UInt8])
    /// Close with this code and reason (the room already treats the socket as gone).
    case close(SocketID, code: UInt16, reason: String)
    /// An always-on, zero-PII lifecycle line (room tag, never the name, an IP or a key).
    case log(String)
    /// Run this Proof's storage step on the room's store lane (the read, the signed join's check
    /// against the verifier it reads, a phone's registration token) and hand the answer to
    /// `admissionLoaded`. At most one is outstanding per room.
    case load(AdmissionLoad)
    /// Write this on the room's store lane; nobody waits for it.
    case persist(RoomWrite)
    /// Stop reading this socket: its frames wait behind a storage answer (they are held in the
    /// room, in order, and what the transport has not read yet stays in the kernel).
    case holdReading(SocketID)
    /// Read this socket again.
    case resumeReading(SocketID)
}

/// What to do with one frame: on the splice's common path a single forward, with no array.
public enum FrameVerdict: Equatable, Sendable {
    /// Forward the frame to this socket: the splice's common case.
    case forward(to: SocketID)
    /// Nothing to do.
    case none
    /// Perform these actions in order.
    case actions([RoomAction])

    /// The verdict as a list of actions.
    public var actions: [RoomAction] {
        switch self {
        case let .forward(target): [.forward(to: target)]
        case .none: []
        case let .actions(actions): actions
        }
    }
}

/// One room's admission and splice rules (relay.md §3), as a pure state machine: events in,
/// actions out, time passed in. No sockets and no storage calls: storage is actions too — a Proof
/// that needs the store is a two-step transition (`.load`, then `admissionLoaded`), and writes are
/// `.persist` actions nobody waits for — so every rule is tested without I/O, and a slow store
/// never stalls the loop the room lives on.
public struct RoomMachine {
    /// The rules every room of a relay shares (relay.md §3, defaults as there).
    public struct Configuration: Sendable {
        /// The relay's origin, bound into every join transcript.
        public var origin: String
        /// Attestation mode (a pairing phone needs a ticket) or open mode.
        public var attestationRequired: Bool
        /// Sockets a room holds before admission; a newer one closes the oldest 1008 `too many
        /// pending` (§3.9).
        public var preAuthCap = 4
        /// How long a socket may take to be admitted before it is closed 1008 `admission timeout`
        /// (§3.9).
        public var admissionDeadline: Duration = .seconds(15)
        /// Proofs a room takes per ``admissionWindow``, all roles and outcomes (§3.10).
        public var admissionLimit = 40
        /// The window of ``admissionLimit``.
        public var admissionWindow: Duration = .seconds(10)
        /// Phone admissions per Mac park in a pairing room; one more tears the room down (§3.5).
        public var pairingCycleCap = 8
        /// How long a registration token lives.
        public var tokenTTL: Duration = .seconds(300)
        /// The largest frame before admission (§2.7).
        public var preAuthFrameCap = 8_192
        /// The largest frame after admission (§2.7).
        public var admittedFrameCap = 262_144
        /// Spliced frames per room per second (0 = off).
        public var maxFramesPerSecond = 500
        /// Bytes a room may relay per 24 hours (§3.12).
        public var dailyByteQuota: Int64 = 536_870_912
        /// The quota record is persisted after this many more bytes (and on roll-over and trips).
        public var quotaFlushStep: Int64 = 4_194_304
        /// A signed join refreshes the stored activity (§6.2 `lastActivity`) only when the stored
        /// one is at least this old. The relay sets it to 1% of the idle TTL (7.2 h of 30 days):
        /// reaping is that much less precise, and a reconnect storm (a failover, a deploy: every
        /// parked Mac rejoins at once) writes nothing for rooms joined in the last hours — a
        /// write per join would double the primary's load exactly when it is busiest.
        public var activityGranularity: Duration = .seconds(60)

        /// The defaults for a relay at `origin`.
        public init(origin: String, attestationRequired: Bool) {
            self.origin = origin
            self.attestationRequired = attestationRequired
        }
    }

    enum State: Equatable {
        case hello
        case challenged(nonce: [UInt8], hello: Hello)
        case admitted(RelayRole)
    }

    struct Socket {
        var state: State
        let connectedAt: MonotonicInstant
    }

    /// What every room of a relay shares: held once, referenced by each machine, so a resident
    /// room costs its own state only.
    public final class Context: Sendable {
        /// The rules every room follows.
        public let configuration: Configuration
        let random: @Sendable (Int) -> [UInt8]

        /// - Parameter configuration: the rules every room follows.
        /// - Parameter random: the source of nonces and tokens; nil means the CSPRNG (tests fix it).
        public init(configuration: Configuration, random: (@Sendable (Int) -> [UInt8])? = nil) {
            self.configuration = configuration
            self.random = random ?? { SecureRandom.bytes($0) }
        }
    }

    /// A Proof waiting for its storage answer, and what arrived meanwhile: out of line, since a
    /// room holds one only for the few milliseconds of a store round trip.
    struct Admission {
        let id: SocketID
        let nonce: [UInt8]
        let hello: Hello
        let proof: Proof
        /// The registration token the load writes for a phone whose Mac was here at its Proof.
        let token: RegistrationTokenIssue?
        /// Pre-auth frames that arrived while the answer was awaited, in arrival order; run once it
        /// comes (their sockets are held meanwhile, so this stays within one read's worth).
        var deferred: [(id: SocketID, isText: Bool, payload: [UInt8])] = []
        /// Sockets not being read until this answer (or a later one) comes.
        var held: [SocketID] = []
    }

    /// The room this machine runs.
    public let room: RoomName
    /// The room's name at rest and in the log (computed once: every store call and log line uses it).
    public let key: RoomKey
    private let context: Context
    /// The rules this room follows.
    public var configuration: Configuration { context.configuration }
    private func random(_ count: Int) -> [UInt8] { context.random(count) }
    private var sockets = SmallMap<SocketID, Socket>()
    /// Sockets this machine closed, until their disconnect: what they were, for the log line. A
    /// plain array rather than a `SmallMap`, whose first entry is inline: a parked room has none
    /// closing and pays nothing for it.
    private var closing: [(id: SocketID, state: State)] = []
    /// §3.4 step 1, on the monotonic clock. Readable so the relay can keep it past the room's
    /// eviction (a room emptied by each attempt on a fresh socket must still count them).
    public private(set) var admissionWindow: FixedWindow
    private var admissionStorage = OutOfLine<Admission>()
    private var admission: Admission? {
        get { admissionStorage.value }
        set { admissionStorage.value = newValue }
    }
    /// The splice's counters, made at the first admitted frame: a parked mac never needs them.
    private var splice: Splice?

    private final class Splice {
        // Touched by every relayed frame, only on the room's loop: exclusivity is not checked at
        // run time (the check was the one left on the splice path, one call a frame).
        @exclusivity(unchecked) var frameWindow: FixedWindow
        /// The 24-hour byte count, once loaded or started (§3.12).
        @exclusivity(unchecked) var quota: QuotaRecord?
        @exclusivity(unchecked) var quotaPersistedBytes: Int64 = 0

        init(maxFramesPerSecond: Int, quota: QuotaRecord?) {
            frameWindow = FixedWindow(limit: maxFramesPerSecond, window: .seconds(1))
            self.quota = quota
            quotaPersistedBytes = quota?.bytes ?? 0
        }
    }
    /// A pairing-mode phone admission charged the stored cycle count during this mac park.
    private var chargedCycles = false

    /// The machine of `room`, holding no socket yet.
    ///
    /// - Parameter room: the room's name.
    /// - Parameter context: what every room of the relay shares.
    /// - Parameter admissionWindow: the window this room had when it was last evicted, if it is
    ///   still running.
    public init(room: RoomName, context: Context, admissionWindow: FixedWindow? = nil) {
        self.room = room
        key = RoomKey(room)
        self.context = context
        self.admissionWindow = admissionWindow
            ?? FixedWindow(limit: context.configuration.admissionLimit, window: context.configuration.admissionWindow)
    }

    /// A machine with a context of its own (tests).
    public init(room: RoomName, configuration: Configuration, random: (@Sendable (Int) -> [UInt8])? = nil) {
        self.init(room: room, context: Context(configuration: configuration, random: random))
    }

    /// True while a Proof waits for its storage answer.
    public var isAwaitingStorage: Bool { !admissionStorage.isEmpty }

    /// Sockets the room still counts (pre-auth and admitted).
    public var socketCount: Int { sockets.count }
    /// Whether the room holds no socket at all.
    public var isEmpty: Bool { sockets.isEmpty }

    /// The socket admitted with `role`, if any.
    public func admitted(_ role: RelayRole) -> SocketID? {
        sockets.first { $0.value.state == .admitted(role) }?.key
    }

    /// The socket's admission state as the disconnect log names it (relay.md §9.1).
    public func stateName(of id: SocketID) -> String {
        switch sockets[id]?.state ?? closingState(of: id) {
        case .hello?: "hello"
        case .challenged?: "challenged"
        case .admitted?: "admitted"
        case nil: "?"
        }
    }

    /// The role a socket is admitted as or has claimed in its Hello; nil before any Hello.
    public func role(of id: SocketID) -> RelayRole? {
        switch sockets[id]?.state ?? closingState(of: id) {
        case let .admitted(role)?: role
        case let .challenged(_, hello)?: hello.role
        default: nil
        }
    }

    /// Whether `id` is admitted (in either role).
    public func isAdmitted(_ id: SocketID) -> Bool {
        if case .admitted? = sockets[id]?.state { return true }
        return false
    }

    // MARK: Events

    /// A socket was upgraded into this room (§2.3, §3.9) at `now` (monotonic ms, its arrival): it
    /// waits for a Hello; the pre-auth cap evicts the oldest pending sockets.
    public mutating func connected(_ id: SocketID, now: MonotonicInstant) -> [RoomAction] {
        sockets[id] = Socket(state: .hello, connectedAt: now)
        var actions: [RoomAction] = [.log("relay \(key.logTag) connect")]
        // Counted before anything is collected: over the cap is rare, and this runs on every connect.
        var pendingCount = 0
        for (_, socket) in sockets {
            if case .admitted = socket.state { continue }
            pendingCount += 1
        }
        guard pendingCount > configuration.preAuthCap else { return actions }
        let pending = sockets.filter { if case .admitted = $0.value.state { return false } else { return true } }
            .sorted { ($0.value.connectedAt, $0.key) < ($1.value.connectedAt, $1.key) }
        for (victim, _) in pending.prefix(max(0, pending.count - configuration.preAuthCap)) {
            actions += close(victim, 1008, "too many pending")
        }
        return actions
    }

    /// A frame from a socket, as actions (tests and control frames; the relay's splice path uses
    /// `receive`).
    public mutating func frame(from id: SocketID, isText: Bool, payload: [UInt8], now: RoomTime) -> [RoomAction] {
        receive(from: id, isText: isText, payload: payload, now: now).actions
    }

    /// A frame from a socket. `isText` and `payload` as received; a text frame's size for the caps
    /// is its UTF-16 length (relay.md measures text in UTF-16 code units).
    public mutating func receive(from id: SocketID, isText: Bool, payload: [UInt8], now: RoomTime) -> FrameVerdict {
        guard let socket = sockets[id] else { return .none }   // closing or gone: dropped
        let size = isText ? Self.utf16Length(ofUTF8: payload) : payload.count
        switch socket.state {
        case let .admitted(role):
            return data(id, role: role, size: size, now: now)
        case .hello, .challenged:
            if admission != nil {
                // Frames on one socket run strictly in order (§6.9), and a Proof must not be read
                // against a room state that a pending one is about to change: wait for the answer.
                admission!.deferred.append((id, isText, payload))
                guard !admission!.held.contains(id) else { return .none }
                admission!.held.append(id)
                return .actions([.holdReading(id)])
            }
            return .actions(preAuthFrame(id, socket.state, isText: isText, payload: payload, size: size, now: now))
        }
    }

    private mutating func preAuthFrame(_ id: SocketID, _ state: State, isText: Bool, payload: [UInt8], size: Int, now: RoomTime) -> [RoomAction] {
        guard size <= configuration.preAuthFrameCap else { return close(id, 1009, "frame too large") }
        switch state {
        case .hello: return hello(id, payload: payload)
        case let .challenged(nonce, hello): return proof(id, payload: payload, nonce: nonce, hello: hello, now: now)
        case .admitted: return []
        }
    }

    /// The I/O layer reports a socket gone that the room did not close itself (the client closed,
    /// a transport error, keepalive). An admitted socket's peer is closed 1001 `peer gone` (§3.13).
    public mutating func disconnected(_ id: SocketID) -> [RoomAction] {
        forgetClosing(id)
        guard let socket = sockets.removeValue(forKey: id) else { return [] }
        var actions = endParkIfMacGone()
        if case let .admitted(role) = socket.state, let peer = admitted(role == .mac ? .phone : .mac) {
            actions += close(peer, 1001, "peer gone")
        }
        return actions
    }

    /// Housekeeping (§3.9): a socket still pre-auth more than the deadline after connecting is
    /// closed 1008 `admission timeout`.
    public mutating func tick(now: MonotonicInstant) -> [RoomAction] {
        var actions: [RoomAction] = []
        for (id, socket) in sockets.sorted(by: { $0.key < $1.key }) {
            if case .admitted = socket.state { continue }
            if now.elapsed(since: socket.connectedAt) > configuration.admissionDeadline { actions += close(id, 1008, "admission timeout") }
        }
        return actions
    }

    /// The earliest instant `tick` has work: the oldest pre-auth socket's deadline.
    public var nextDeadline: MonotonicInstant? {
        // A loop, not compactMap/min: asked after every frame of an admission, and each array
        // it built was an allocation per call.
        var earliest: MonotonicInstant?
        for (_, socket) in sockets {
            if case .admitted = socket.state { continue }
            let deadline = socket.connectedAt + configuration.admissionDeadline + .nanoseconds(1)
            if earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        return earliest
    }

    /// A socket has not taken what the relay sent it for the stall timeout (its peer's frames,
    /// held back all that while, or the relay's own replies: pongs, refusals): it is closed 1008
    /// `write stalled`, admitted or not. An admitted socket's peer stays admitted, to be re-spliced
    /// to whoever takes the slot next, as after a displacement (relay.md §3.13, Tether).
    public mutating func stalled(_ id: SocketID) -> [RoomAction] {
        guard let socket = sockets[id] else { return [] }
        guard case let .admitted(role) = socket.state else { return close(id, 1008, "write stalled") }
        return [.log("relay \(key.logTag) stalled role=\(role.rawValue)")] + close(id, 1008, "write stalled")
    }

    /// Closes every socket with one code and reason (delete, expiry, shutdown, quota).
    public mutating func closeAll(code: UInt16, reason: String) -> [RoomAction] {
        sockets.keys.sorted().flatMap { close($0, code, reason) }
    }

    /// A text frame's JavaScript length (§3.11) straight from its UTF-8 (which the WebSocket layer
    /// has validated): one unit per scalar, two for a scalar above U+FFFF (a 4-byte sequence).
    public static func utf16Length(ofUTF8 bytes: [UInt8]) -> Int {
        var count = 0
        for byte in bytes {
            if byte & 0xC0 != 0x80 { count += 1 }
            if byte >= 0xF0 { count += 1 }
        }
        return count
    }

    // MARK: Hello (§3.3)

    private mutating func hello(_ id: SocketID, payload: [UInt8]) -> [RoomAction] {
        guard let hello = Hello.parse(payload) else { return close(id, 1008, "bad hello") }
        let nonce = random(32)
        sockets[id]?.state = .challenged(nonce: nonce, hello: hello)
        return [.send(id, AdmissionReply.challenge(nonce: nonce))]
    }

    // MARK: Proof (§3.4)

    private enum Credential {
        case signed
        case ticket
        case parkedMac
        case open

        var log: String {
            switch self {
            case .signed: "signed"
            case .ticket: "ticket"
            case .parkedMac: "park(pre-auth mac)"
            case .open: "open"
            }
        }
    }

    /// Steps 1–2 here; the rest once storage answers (`admissionLoaded`). One read serves §3.4 and
    /// §3.5 ("established" is read once per Proof); it also consumes an attested phone's ticket
    /// when the room turns out not to be established.
    private mutating func proof(_ id: SocketID, payload: [UInt8], nonce: [UInt8], hello: Hello, now: RoomTime) -> [RoomAction] {
        guard admissionWindow.hit(now: now.monotonic) else { return refuse(id, "rate limited") }
        guard let proof = Proof.parse(payload) else { return refuse(id, "bad proof") }
        let ticket = configuration.attestationRequired && hello.role == .phone ? proof.ticket : nil
        let join = proof.signature.map {
            JoinCheck(transcript: JoinTranscript(role: hello.role, nonce: nonce, room: room, origin: configuration.origin).bytes, signature: $0)
        }
        // Only a phone with a Mac to splice to can be admitted, so only then is a token written
        // (a phone retrying while its Mac sleeps costs no write).
        let token = hello.role == .phone && admitted(.mac) != nil
            ? RegistrationTokenIssue(token: Base64.encode(random(24)), expiresAt: (now.wall + configuration.tokenTTL).unixMilliseconds,
                                     attestationRequired: configuration.attestationRequired)
            : nil
        admission = Admission(id: id, nonce: nonce, hello: hello, proof: proof, token: token)
        return [.load(AdmissionLoad(query: AdmissionQuery(ticket: ticket, now: now.wall.unixMilliseconds), join: join, registrationToken: token))]
    }

    /// Storage answered the outstanding `.load`: the Proof continues (§3.4 step 3 on), then the
    /// frames that waited behind it run in order, and their sockets are read again.
    public mutating func admissionLoaded(_ answer: AdmissionAnswer, now: RoomTime) -> [RoomAction] {
        guard let pending = admission else { return [] }
        admission = nil
        let read = answer.read
        if splice == nil, let quota = read.quota {
            splice = Splice(maxFramesPerSecond: configuration.maxFramesPerSecond, quota: quota)
        }
        var actions: [RoomAction] = []
        // The socket may have gone meanwhile (closed, evicted, timed out): nothing to admit.
        if case .challenged? = sockets[pending.id]?.state {
            // An established room's token is minted, never stored (`RegistrationTokenIssue`).
            let token = answer.tokenStored || read.state.verifier != nil ? pending.token?.token : nil
            actions += continueProof(pending, read, joinVerified: answer.joinVerified, token: token, now: now)
        }
        return actions + resumeDeferred(after: pending, now: now)
    }

    /// Storage could not answer the outstanding `.load` (a database that is down, a full disk):
    /// the proving socket is closed 1011 `internal error` — the spec's answer to a failed handler,
    /// and never a verdict on its credentials (a "not established" would make a client re-pair) —
    /// and the frames that waited behind it run as usual. Sockets already admitted are untouched.
    public mutating func admissionFailed(now: RoomTime) -> [RoomAction] {
        guard let pending = admission else { return [] }
        admission = nil
        var actions: [RoomAction] = []
        if case .challenged? = sockets[pending.id]?.state {
            actions += close(pending.id, 1011, "internal error")
        }
        return actions + resumeDeferred(after: pending, now: now)
    }

    /// The frames that waited behind `pending`'s load run in order, and their sockets are read
    /// again — unless one of them is another Proof, which loads in its turn.
    private mutating func resumeDeferred(after pending: Admission, now: RoomTime) -> [RoomAction] {
        var actions: [RoomAction] = []
        var deferred = pending.deferred[...]
        while admission == nil, let next = deferred.popFirst() {
            for action in receive(from: next.id, isText: next.isText, payload: next.payload, now: now).actions {
                guard case let .forward(target) = action else {
                    actions.append(action)
                    continue
                }
                actions.append(.deliver(from: next.id, to: target, isText: next.isText, payload: next.payload))
            }
        }
        var stillHeld: [SocketID] = []
        if admission != nil {
            // Another Proof is loading: what is left waits behind it, and the sockets with frames
            // left (and the one proving) stay held until its answer.
            admission!.deferred.insert(contentsOf: deferred, at: 0)
            stillHeld = pending.held.filter { id in id == admission!.id || admission!.deferred.contains { $0.id == id } }
            admission!.held = stillHeld + admission!.held.filter { !stillHeld.contains($0) }
        }
        for id in pending.held where !stillHeld.contains(id) && sockets[id] != nil { actions.append(.resumeReading(id)) }
        return actions
    }

    private mutating func continueProof(_ pending: Admission, _ read: AdmissionRead, joinVerified: Bool, token: String?, now: RoomTime) -> [RoomAction] {
        let id = pending.id, hello = pending.hello, proof = pending.proof
        var actions: [RoomAction] = []
        let credential: Credential
        if read.state.verifier != nil {
            guard proof.signature != nil else { return refuse(id, "signature required") }
            guard joinVerified else { return refuse(id, "bad signature") }
            // Refreshed before the slot checks, so even a refused join keeps the room alive; a
            // stored activity newer than the granularity (or ahead of this node's clock) stands.
            if read.lastActivity.map({ WallInstant(unixMilliseconds: $0) + configuration.activityGranularity <= now.wall }) ?? true {
                actions.append(.persist(.touch(at: now.wall.unixMilliseconds)))
            }
            credential = .signed
        } else if configuration.attestationRequired {
            if hello.role == .mac {
                credential = .parkedMac
            } else {
                guard proof.ticket != nil else { return refuse(id, "ticket required") }
                // Consumed by the read, before the slot checks: a phone refused below must re-attest.
                guard read.ticket != nil else { return refuse(id, "bad ticket") }
                credential = .ticket
            }
        } else {
            credential = .open
        }
        return actions + admit(id, hello: hello, credential: credential, stored: read.state, token: token, now: now)
    }

    // MARK: Slot admission (§3.5)

    /// `token`: the registration token for a phone's Result (in a pairing room, one the load stored).
    private mutating func admit(_ id: SocketID, hello: Hello, credential: Credential, stored: AdmissionState, token: String?, now: RoomTime) -> [RoomAction] {
        let established = stored.verifier != nil
        let role = hello.role
        var actions: [RoomAction] = []
        // A count of 0 is already what a reset writes; skipping it spares a write per park.
        if !established, role == .mac, stored.pairingCycles != 0 { actions.append(.persist(.pairingCycles(0))) }
        if role == .phone {
            guard let mac = admitted(.mac), mac != id else { return actions + refuse(id, "mac offline") }
            // A Result must never name a token storage should hold and does not. (A Mac here now
            // was here at the Proof, since its own Proof would have waited behind this one's load.)
            guard token != nil else { return actions + refuse(id, "mac offline") }
            if !established {
                let cycles = stored.pairingCycles + 1
                if cycles > configuration.pairingCycleCap {
                    chargedCycles = false
                    return actions + [.persist(.deleteRoom), .log("relay \(key.logTag) teardown reason=pairing cycle cap")]
                        + closeAll(code: 1000, reason: "pairing cycle cap")
                }
                actions.append(.persist(.pairingCycles(cycles)))
                chargedCycles = true
            }
        }
        if let incumbent = admitted(role), incumbent != id {
            if hello.nonDisplacing { return actions + refuse(id, "slot occupied") }
            // Newest wins; the incumbent's peer stays and is re-spliced to this socket.
            actions += close(incumbent, 1000, "displaced")
        }
        sockets[id]?.state = .admitted(role)
        let peer = admitted(role == .mac ? .phone : .mac) != nil
        actions.append(.log("relay \(key.logTag) admit role=\(role.rawValue) via=\(credential.log) peer=\(peer)\(peer ? " (spliced)" : "")"))
        if role == .phone, let token {
            // Stored by the load (`AdmissionLoad`), before this Result: the phone can never
            // present a token that is not there.
            actions.append(.send(id, AdmissionReply.admitted(registrationToken: token)))
        } else {
            actions.append(.send(id, AdmissionReply.admitted()))
        }
        return actions
    }

    // MARK: Splice (§3.11, §3.12)

    private mutating func data(_ id: SocketID, role: RelayRole, size: Int, now: RoomTime) -> FrameVerdict {
        let peer = admitted(role == .mac ? .phone : .mac)
        guard size <= configuration.admittedFrameCap else {
            return .actions((peer.map { close($0, 1001, "peer gone") } ?? []) + close(id, 1009, "frame too large"))
        }
        let splice = self.splice ?? {
            let splice = Splice(maxFramesPerSecond: configuration.maxFramesPerSecond, quota: nil)
            self.splice = splice
            return splice
        }()
        guard splice.frameWindow.hit(now: now.monotonic) else {
            return .actions((peer.map { close($0, 1001, "peer gone") } ?? []) + close(id, 1008, "frame rate exceeded"))
        }
        let (withinQuota, flush) = chargeQuota(size, now: now, splice)
        guard withinQuota else {
            return .actions([.persist(.quota(flush!)), .log("relay \(key.logTag) quota exceeded")] + closeAll(code: 1008, reason: "daily quota exceeded"))
        }
        // No peer yet: dropped silently (it still counted toward the rate and the quota).
        guard let flush else { return peer.map { .forward(to: $0) } ?? .none }
        return .actions([.persist(.quota(flush))] + (peer.map { [.forward(to: $0)] } ?? []))
    }

    /// Adds `size` to the room's 24-hour byte count (§3.12): whether the frame is within the quota,
    /// and the record to persist, if any (on roll-over, on a trip, and after each flush step). The
    /// day is wall time (it is persisted), read so that a backwards clock step never rolls it.
    private func chargeQuota(_ size: Int, now: RoomTime, _ splice: Splice) -> (Bool, QuotaRecord?) {
        let today = now.wall.unixMilliseconds
        var record = splice.quota ?? QuotaRecord(dayStart: today, bytes: 0)
        var rolled = false
        if today > record.dayStart, today - record.dayStart >= QuotaRecord.window {
            record = QuotaRecord(dayStart: today, bytes: 0)
            rolled = true
        }
        record.bytes += Int64(size)
        splice.quota = record
        let within = record.bytes <= configuration.dailyByteQuota
        guard rolled || !within || record.bytes - splice.quotaPersistedBytes >= configuration.quotaFlushStep else { return (true, nil) }
        splice.quotaPersistedBytes = record.bytes
        return (within, record)
    }

    // MARK: Helpers

    private mutating func refuse(_ id: SocketID, _ reason: String) -> [RoomAction] {
        [.send(id, AdmissionReply.refused(reason))] + close(id, 1008, reason)
    }

    private func closingState(of id: SocketID) -> State? { closing.first { $0.id == id }?.state }

    private mutating func forgetClosing(_ id: SocketID) {
        closing.removeAll { $0.id == id }
        if closing.isEmpty { closing = [] }   // storage given back
    }

    /// Closes `id` and forgets it at once: frames it sends meanwhile are dropped (§3.1 Tether),
    /// and its going away never propagates to a peer.
    private mutating func close(_ id: SocketID, _ code: UInt16, _ reason: String) -> [RoomAction] {
        guard let socket = sockets.removeValue(forKey: id) else { return [] }
        forgetClosing(id)
        closing.append((id, socket.state))
        return [.close(id, code: code, reason: reason)] + endParkIfMacGone()
    }

    /// §6.10 (Tether): the cycle count matters only while a mac is parked, and the next park
    /// resets it, so once no mac is admitted the stored count goes — a pairing that never
    /// completes leaves nothing behind.
    private mutating func endParkIfMacGone() -> [RoomAction] {
        guard chargedCycles, admitted(.mac) == nil else { return [] }
        chargedCycles = false
        return [.persist(.pairingCycles(0))]
    }
}
