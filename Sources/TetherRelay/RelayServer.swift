import Foundation
import Glibc
import TetherAttest
import TetherCrypto
import TetherService
public import TetherNet
public import TetherStore
import TetherWire

/// The companion relay on TetherNet: the entry gate and per-IP limits (relay.md §2.3), rooms on
/// the loop their name maps to, and each room's `RoomMachine` driven by its sockets.
///
/// Not yet here: App Attest verification (its own issue; attestation mode refuses `/attest`).
public final class RelayServer: HTTPServerDelegate, @unchecked Sendable {   // mutable state only under `gate`; rooms only on their loops
    public let configuration: RelayConfiguration
    public let group: EventLoopGroup
    /// Storage runs here, never on a loop (ARCHITECTURE: storage is an action).
    public let storage: StoreExecutor
    var store: any RoomStore { storage.store }
    /// Monotonic time for deadlines, windows and timeouts; wall time only for what is persisted.
    public let clock: RelayClock
    /// How long an admitted socket may hold its peer back (queue above the high-water mark, the
    /// peer not read) before it is closed 1008 `write stalled`. Twice the keepalive interval: a
    /// live but slow phone drains its 256 KiB well within it, while a suspended app that stops
    /// reading cannot pin the relay's buffers and its peer for longer than the keepalive would.
    public static let stallTimeoutMs: UInt64 = 60_000
    var stallTimeoutMs: UInt64 { Self.stallTimeoutMs }
    private var http: HTTPServer?
    private let gate = NetLock()
    private var wsLimiter: FixedWindowLimiter<String>
    private var attestLimiter: FixedWindowLimiter<String>
    private let endpoints: RoomEndpoints
    /// Shared by every room's machine.
    private let machineContext: RoomMachine.Context
    private var socketsPerIP: [String: Int] = [:]
    private var totalSockets = 0
    /// Socket ids in arrival order across all loops (§3.9 evicts the oldest pending).
    private var nextSocketID: UInt64 = 0
    /// Rooms with a host on some loop (§2.6 "resident"), for the `maxRooms` cap, by their
    /// per-process seeded hash: 8 bytes a room instead of 32. A client cannot aim a name at a
    /// resident room's hash (the seed is random per process), and an accidental 64-bit collision
    /// only lets one room share another's place under the cap.
    private var resident: Set<Int> = []
    /// Rooms of each loop (touched only on that loop).
    let rooms: [RoomTable]
    /// The periodic chores' timers (touched only on the first loop).
    var chores: [Chore: EventLoop.TimerID] = [:]
    /// The buckets this node serves (§8).
    public let sharding: ShardOwnership
    private let log: @Sendable (String) -> Void
    /// The §2.10 counters, served on loopback `/metrics`.
    public let metrics = RelayMetrics()
    private var verboseLog: Bool
    private var faults = FaultBudget()
    /// Called when internal faults exceed the budget (§7.1); `tether relay` exits 1 so its
    /// supervisor restarts it. Called at most once.
    public var onFaultBudgetExceeded: @Sendable () -> Void = {}
    private var faultBudgetExceeded = false

    public init(configuration: RelayConfiguration, group: EventLoopGroup, store: any RoomStore,
                clock: RelayClock = .system, storeLanes: Int = StoreExecutor.defaultLanes,
                log: (@Sendable (String) -> Void)? = nil) {
        self.configuration = configuration
        self.group = group
        storage = StoreExecutor(store: store, lanes: storeLanes)
        self.clock = clock
        self.log = log ?? Self.writeToStandardError
        wsLimiter = FixedWindowLimiter(limit: configuration.wsRateLimit, window: 60_000)
        attestLimiter = FixedWindowLimiter(limit: configuration.attestRateLimit, window: 60_000)
        endpoints = RoomEndpoints(origin: configuration.origin, attestationRequired: configuration.attestationRequired,
                                  verifier: Self.appAttestVerifier(configuration))
        rooms = group.loops.map { RoomTable(loop: $0) }
        machineContext = Self.machineContext(configuration)
        sharding = ShardOwnership(origin: configuration.origin)
        verboseLog = configuration.verboseLog
        store.setFaultHandler { [weak self] in self?.fault("storage error", $0) }
        for table in rooms { table.server = self }
    }

    /// An internal fault survived (§7.1): counted, logged as `relay: <kind> (continuing): <msg>`,
    /// and, past the budget, handed to `onFaultBudgetExceeded`. `message` must be zero-PII.
    public func fault(_ kind: String, _ message: String) {
        metrics.processException()
        write("relay: \(kind) (continuing): \(message)")
        let exceeded = gate.withLock {
            guard faults.record(now: clock.monotonicMs()), !faultBudgetExceeded else { return false }
            faultBudgetExceeded = true
            return true
        }
        guard exceeded else { return }
        write("relay: more than \(faults.limit) internal faults within \(faults.window / 1000) s; exiting for a clean restart")
        onFaultBudgetExceeded()
    }

    /// App Attest for attestation mode: `APP_ID`, `APPATTEST_ENV` and the root (Apple's unless
    /// `APPATTEST_ROOT_PEM`). The configuration has already checked the PEM; should it still
    /// fail, there is no verifier and every attestation is refused (fail closed).
    static func appAttestVerifier(_ configuration: RelayConfiguration) -> AppAttestVerifier? {
        guard configuration.attestationRequired, let appID = configuration.appID else { return nil }
        return try? AppAttestVerifier(appID: appID, environment: configuration.appAttestDevelopment ? .development : .production,
                                      rootPEM: configuration.appAttestRootPEM)
    }

    /// Loops the relay's group should have: one per core, except with in-process TLS, where a
    /// session stays on the loop that accepted it and so every room must share that one loop.
    /// TLS at a proxy (the recommended deployment) keeps all cores.
    public static func loopCount(for configuration: RelayConfiguration) -> Int? {
        configuration.tlsCertificatePath != nil ? 1 : nil
    }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        var http = HTTPServer.Configuration()
        http.host = configuration.host
        http.port = configuration.port
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            http.tls = try TLSServerContext(certificateChainPath: cert, privateKeyPath: key)
        }
        if let map = configuration.shardMap, !store.publishShardMap(map) {
            write("relay: RELAY_SHARD_MAP version \(map.version) not published: the database already holds version \(store.shardMap()?.version ?? 0), and versions only grow")
        }
        if let map = store.shardMap() { sharding.adopt(map) }
        let server = HTTPServer(group: group, configuration: http, delegate: self)
        self.http = server
        let port = try server.start()
        startHousekeeping()
        startMetricsPush()
        startShardMapWatch()
        return port
    }

    /// Graceful stop: no new connections, every room's sockets closed 1001 `server shutting down`.
    public func shutdown() {
        http?.stopAccepting()
        stopHousekeeping()
        stopMetricsPush()
        stopShardMapWatch()
        for (index, loop) in group.loops.enumerated() {
            let table = rooms[index]
            _ = try? loop.submitAndWait { table.closeAll(code: 1001, reason: "server shutting down") }
        }
        http?.shutdown(grace: .seconds(5))
        // The rooms' last writes (quota counts, cycle resets) reach the store before exit.
        storage.drain()
    }

    // MARK: HTTP

    /// §2.2 steps 2–6, on the head alone, so they precede the body cap (step 7): the gate, the
    /// request counter, the `/attest*` limiter and the room cap. The paths answered before the
    /// gate (step 1) pass through to `respond`.
    public func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        if Self.isAnsweredBeforeTheGate(head) { return nil }
        let room: RoomName
        switch gate(head) {
        case let .failure(refusal): return refusal.response
        case let .success(admitted): room = admitted
        }
        metrics.httpRequest()
        if head.path.hasPrefix("/attest") {
            let ip = clientIP(head, peer: peer)
            let now = clock.monotonicMs()
            guard gate.withLock({ attestLimiter.hit(ip, now: now) }) else { return .text(429, "rate limited") }
        }
        guard gate.withLock({ hasRoomFor(room) }) else { return .text(503, "capacity") }
        return nil
    }

    /// §2.2 step 1: `/metrics` (any method), `/healthz`, and `GET`/`HEAD /shardmap.json`.
    static func isAnsweredBeforeTheGate(_ head: HTTPRequestHead) -> Bool {
        head.path == "/metrics" || head.path == "/healthz"
            || (head.path == "/shardmap.json" && (head.method == "GET" || head.method == "HEAD"))
    }

    /// §2.2 step 1, then step 8 for a request `screen` let through: the room's endpoint, run on
    /// the room's store lane (after the room's earlier storage work, before its later), and any
    /// teardown on the room's loop.
    public func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        if request.head.path == "/metrics" { return scrape(request, reply: reply) }
        if request.head.path == "/healthz" { return health(request, reply: reply) }
        if Self.isAnsweredBeforeTheGate(request.head) { return serveShardMap(reply: reply) }
        // `screen` has passed the gate, so the room header is present and valid.
        guard let room = roomName(request.head) else { return reply(.text(400, "bad room")) }
        let path = String(request.head.path)
        guard request.head.method == "POST", RoomEndpoints.routes.contains(path) else {
            return reply(.text(501, "not implemented", contentType: "text/plain;charset=UTF-8"))
        }
        let index = room.bucket % group.loops.count
        let table = rooms[index]
        let body = request.body
        storage.submit(RoomKey(room)) { [self] store in
            let outcome = endpoints.handle(path: path, body: body, room: room, store: store, now: clock.wallMs()) { SecureRandom.bytes($0) }
            if outcome.status == 500 { metrics.httpError() }
            diagnostic("relay \(room.logTag) POST \(path) -> \(outcome.status)\(outcome.diagnostic.map { " (\($0))" } ?? "")")
            guard outcome.tearDown else { return reply(.json(outcome.status, Array(outcome.json.utf8))) }
            group.loops[index].execute { [self] in
                write("relay \(room.logTag) teardown reason=room deleted")
                table.closeRoom(room, code: 1000, reason: "room deleted")
                reply(.json(outcome.status, Array(outcome.json.utf8)))
            }
        }
    }

    /// A request the gate turned away.
    struct Refusal: Error {
        let response: HTTPResponse
    }

    /// §2.2 steps 2–3 and §2.3 step 1: Origin, then the room header, then (§8.4) the room's owner.
    private func gate(_ head: HTTPRequestHead) -> Result<RoomName, Refusal> {
        if head.headers.contains("Origin") { return .failure(Refusal(response: .text(403, "forbidden"))) }
        guard let room = roomName(head) else { return .failure(Refusal(response: .text(400, "bad room"))) }
        if let misdirected = misdirected(room) { return .failure(Refusal(response: misdirected)) }
        return .success(room)
    }

    /// The `x-relay-room` value with surrounding spaces and tabs trimmed (as Node does). Node joins
    /// duplicates with ", ", which can never be a room name, so more than one value fails.
    private func roomName(_ head: HTTPRequestHead) -> RoomName? {
        let values = head.headers.values("x-relay-room")
        guard values.count == 1 else { return nil }
        let utf8 = values[0].utf8
        guard let first = utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
              let last = utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return nil }
        return RoomName(header: String(values[0][first...last]))
    }

    private func clientIP(_ head: HTTPRequestHead, peer: SocketAddress?) -> String {
        configuration.clientIP.clientIP(cfConnectingIP: head.headers["CF-Connecting-IP"],
                                        forwardedFor: head.headers["X-Forwarded-For"], peer: peer?.host)
    }

    // MARK: WebSocket upgrade (§2.3)

    public func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        let room: RoomName
        switch gate(request.head) {
        case let .failure(refusal):
            metrics.upgradeRejected(refusal.response.status == 421 ? .misdirected : .gate)
            return .refuse(refusal.response)
        case let .success(admitted): room = admitted
        }
        let ip = clientIP(request.head, peer: request.peer)
        let now = clock.monotonicMs()
        var arrival = SocketID(0)
        let refused: (HTTPResponse, RelayMetrics.Rejection)? = gate.withLock {
            guard wsLimiter.hit(ip, now: now) else { return (.text(429, "rate limited"), .rate_limited) }
            guard socketsPerIP[ip, default: 0] < configuration.maxSocketsPerIP else { return (.text(429, "too many connections"), .ip_cap) }
            guard totalSockets < configuration.maxTotalSockets else { return (.text(503, "capacity"), .total_cap) }
            guard hasRoomFor(room) else { return (.text(503, "capacity"), .room_cap) }
            socketsPerIP[ip, default: 0] += 1
            totalSockets += 1
            nextSocketID += 1
            arrival = SocketID(nextSocketID)
            return nil
        }
        if let (response, reason) = refused {
            metrics.upgradeRejected(reason)
            return .refuse(response)
        }
        guard case .upgrade = handshake else {
            release(ip)
            if case let .refuse(response) = handshake { return .refuse(response) }
            return .refuse(.text(400, "bad upgrade"))
        }
        metrics.upgradeAccepted()
        let index = room.bucket % group.loops.count
        let target = group.loops[index]
        let table = rooms[index]
        // Connect time and order are taken here, on arrival: a socket handed off from another
        // loop may reach its room after a later one, and the pre-auth cap evicts by arrival.
        let connectedAt = now, id = arrival
        return .accept { [self] transport, leftover in
            let attach: @Sendable (any Transport) -> Void = { [self] transport in
                table.attach(transport, leftover: leftover, room: room, server: self, ip: ip, id: id, connectedAt: connectedAt)
            }
            if transport.loop === target {
                attach(transport)
            } else if let tcp = transport as? TCPConnection {
                tcp.handoff(to: target) { attach($0) }
            } else {
                // A TLS session cannot move between loops, and a room's table must only be
                // touched from its own loop; `loopCount(for:)` gives TLS a single loop so this
                // never happens — if it does, dropping the socket beats a data race.
                transport.close()
                release(ip)
            }
        }
    }

    var socketsLive: Int { gate.withLock { totalSockets } }

    /// §2.2 step 6 / §2.3 step 5: a resident room is always served; a new one only under the cap.
    /// Called with `gate` held.
    private func hasRoomFor(_ room: RoomName) -> Bool {
        resident.count < configuration.maxRooms || resident.contains(room.hashValue)
    }

    func roomBecameResident(_ room: RoomName) { _ = gate.withLock { resident.insert(room.hashValue) } }
    func roomLeft(_ room: RoomName) { _ = gate.withLock { resident.remove(room.hashValue) } }

    /// Occupancy summed over every loop's rooms, each read on its own loop, then `done`.
    func occupancy(from index: Int = 0, adding sum: RelayMetrics.Occupancy = .init(),
                   _ done: @escaping @Sendable (RelayMetrics.Occupancy) -> Void) {
        guard index < group.loops.count else { return done(sum) }
        let table = rooms[index]
        group.loops[index].execute { [self] in occupancy(from: index + 1, adding: table.occupancy(adding: sum), done) }
    }

    func release(_ ip: String) {
        gate.withLock {
            totalSockets -= 1
            if let count = socketsPerIP[ip] { socketsPerIP[ip] = count > 1 ? count - 1 : nil }
        }
    }

    func makeMachine(for room: RoomName, admissionWindow: FixedWindow?) -> RoomMachine {
        RoomMachine(room: room, context: machineContext, admissionWindow: admissionWindow)
    }

    static func machineContext(_ configuration: RelayConfiguration) -> RoomMachine.Context {
        var machine = RoomMachine.Configuration(origin: configuration.origin, attestationRequired: configuration.attestationRequired)
        machine.dailyByteQuota = configuration.dailyByteQuota
        machine.maxFramesPerSecond = configuration.maxFramesPerSecond
        return RoomMachine.Context(configuration: machine)
    }

    /// A room's write, on its store lane; nobody waits for it.
    func persist(_ write: RoomWrite, for key: RoomKey) {
        storage.submit(key) { $0.apply(write, to: key) }
    }

    var webSocketOptions: WebSocketConnection.Options {
        var options = WebSocketConnection.Options()
        // The transport cap (§2.7): above it the socket closes 1009 before the room sees the frame.
        options.maxFramePayload = 524_288
        options.maxMessageSize = 524_288
        options.keepaliveInterval = .milliseconds(UInt64(configuration.keepaliveMs))
        return options
    }

    func write(_ line: String) { log(line) }

    /// `RELAY_LOG`: verbose diagnostics, flipped at runtime by SIGUSR2 (§9.1).
    public var verbose: Bool {
        get { gate.withLock { verboseLog } }
        set { gate.withLock { verboseLog = newValue } }
    }

    /// A verbose-only line (still zero-PII: tags, never names, IPs or content).
    func diagnostic(_ line: @autoclosure () -> String) {
        if verbose { log(line()) }
    }

    /// One line, one write(2): lines from several loops never interleave, and nothing is buffered
    /// that a crash could lose.
    @Sendable static func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                if written > 0 { offset += written } else if errno != EINTR { return }
            }
        }
    }
}
