import Glibc
import Synchronization
import TetherAttest
import TetherCrypto
public import TetherNet
public import TetherService
public import TetherStore
import TetherSync
import TetherWire

/// The companion relay, built on the service chassis: the public HTTP/WebSocket listener (its
/// router and room gate in `RelayServer+HTTP`, upgrades in `RelayServer+Upgrade`), the shared
/// `ConnectionGate` for per-IP and total limits (relay.md §2.3–§2.6), rooms on the loop their
/// name maps to (`RoomTable`/`RoomHost`, each room's `RoomMachine` driven by its sockets),
/// storage on `StoreExecutor` lanes, periodic work on `Chores`, and the optional admin listener.
/// A library: `tether relay` only parses its settings and runs one.
public final class RelayServer: HTTPServerDelegate, ChassisService {
    /// The settings the relay was started with.
    public let configuration: RelayConfiguration
    /// The log, verbose flag, draining and listeners every service shares.
    public let runtime: ServiceRuntime
    /// The event loops the listeners and rooms run on.
    public let group: EventLoopGroup
    /// Storage runs here, never on a loop (ARCHITECTURE: storage is an action).
    public let storage: RoomStoreExecutor
    var store: any RoomStore { storage.store }
    /// Monotonic time for deadlines, windows and timeouts; wall time only for what is persisted.
    public let clock: RelayClock
    /// Per-IP socket caps, upgrade and `/attest*` limits, the total cap, client-IP derivation.
    public let gate: ConnectionGate
    /// §2.2 step 1 and step 8: the paths the relay answers, each with its methods (set once, at
    /// the end of `init`, since its handlers reach the relay).
    let routes = Locked(Router())
    let endpoints: RoomEndpoints
    /// Shared by every room's machine.
    private let machineContext: RoomMachine.Context
    /// Rooms with a host on some loop (§2.6 "resident"), for the `maxRooms` cap, by their
    /// per-process seeded hash: 8 bytes a room instead of 32. A client cannot aim a name at a
    /// resident room's hash (the seed is random per process), and an accidental 64-bit collision
    /// only lets one room share another's place under the cap.
    private let resident = Locked<Set<Int>>([])
    /// Rooms of each loop (touched only on that loop).
    let rooms: [RoomTable]
    /// Housekeeping, the metrics push and the shard-map poll, on the first loop.
    let chores: Chores<Chore>
    /// The buckets this node serves (§8).
    public let sharding: ShardOwnership
    /// The §2.10 counters, served on loopback `/metrics` and on the admin listener.
    public let metrics = RelayMetrics()
    /// What `/readyz` on the admin listener checks.
    public var readiness: ReadinessChecks { runtime.readiness }
    /// Whether the store answers (a networked database can be down while the relay splices on).
    public let storageHealth = StoreHealth()
    /// The shared store's map announcements (a postgres:// store), stopped at shutdown.
    let mapWatch = Locked<ShardMapWatch?>(nil)
    /// With leases: until when (monotonic ms) this node's own lease is surely live — the start of
    /// its last successful renewal plus the TTL. Past it, others may hold its buckets already.
    let leaseSurelyLiveUntil = Atomic<UInt64>(.max)
    /// A v1 cluster's listener for what other nodes pass on (`RELAY_CLUSTER_PORT`), once started.
    let clusterServer = Locked<HTTPServer?>(nil)
    /// Sockets this node passes to their rooms' owners, per loop.
    let forwardedPipes: [ForwardedPipes]
    private let faults = Locked<(budget: FaultBudget, exceeded: Bool)>((FaultBudget(), false))
    private let faultBudgetHandler = Locked<@Sendable () -> Void>({})

    /// Storage work queued past this many calls means the store has fallen behind the relay's
    /// demand (a reconnect storm on a slow database): `/readyz` says so, so a load balancer sends
    /// new clients elsewhere until it recovers.
    static let storageBacklogLimit = 10_000

    /// A relay, not yet listening.
    ///
    /// - Parameters:
    ///   - configuration: the settings, as `RelaySetting` read them.
    ///   - group: the event loops the listeners and rooms run on.
    ///   - store: where rooms are kept (SQLite, PostgreSQL, or in memory for tests).
    ///   - clock: the clocks the relay reads (the system's, or a test's).
    ///   - storeLanes: storage threads (a room's work always runs on one of them, in order).
    ///   - log: where lines go (tests collect them); nil means a `LogSink` on standard error.
    public init(configuration: RelayConfiguration, group: EventLoopGroup, store: any RoomStore,
                clock: RelayClock = .system, storeLanes: Int = RoomStoreExecutor.defaultLanes,
                log: (@Sendable (String) -> Void)? = nil) {
        self.configuration = configuration
        self.group = group
        storage = StoreExecutor(store: store, lanes: storeLanes)
        self.clock = clock
        runtime = ServiceRuntime(name: "relay", format: configuration.logFormat, verbose: configuration.verboseLog,
                                 level: configuration.logLevel, log: log)
        gate = ConnectionGate(clientIP: configuration.clientIP, limits: Self.gateLimits(configuration), clock: clock) { [runtime] what, refusal in
            runtime.diagnostic("relay: refused a \(what): \(refusal.reason) (\(refusal.response.status))")
        }
        endpoints = RoomEndpoints(origin: configuration.origin, attestationRequired: configuration.attestationRequired,
                                  verifier: Self.appAttestVerifier(configuration))
        rooms = group.loops.map { RoomTable(loop: $0, clock: clock) }
        chores = Chores(loop: group.loops[0])
        machineContext = Self.machineContext(configuration)
        sharding = configuration.cluster.map { ShardOwnership(host: $0.node) } ?? ShardOwnership(origin: configuration.origin)
        forwardedPipes = group.loops.map { ForwardedPipes(loop: $0) }
        for table in rooms { table.server = self }
        let router = Self.router(for: self)
        routes.withLock { $0 = router }
        registerChassisMetrics()
        readiness.register("storage") { [storage, storageHealth] in storageHealth.isAvailable && storage.backlog < Self.storageBacklogLimit }
    }

    /// Called when internal faults exceed the budget (§7.1); `tether relay` exits 1 so its
    /// supervisor restarts it. Called at most once.
    public var onFaultBudgetExceeded: @Sendable () -> Void {
        get { faultBudgetHandler.withLock { $0 } }
        set { faultBudgetHandler.withLock { $0 = newValue } }
    }

    /// An internal fault survived (§7.1): counted, logged as `relay: <kind> (continuing): <msg>`,
    /// and, past the budget, handed to `onFaultBudgetExceeded`. `message` must be zero-PII.
    public func fault(_ kind: String, _ message: String) {
        metrics.processException()
        write("relay: \(kind) (continuing): \(message)", level: .error)
        let now = clock.monotonic()
        let (exceeded, budget) = faults.withLock { state -> (Bool, FaultBudget) in
            guard state.budget.record(now: now), !state.exceeded else { return (false, state.budget) }
            state.exceeded = true
            return (true, state.budget)
        }
        guard exceeded else { return }
        write("relay: more than \(budget.limit) internal faults within \(budget.window.components.seconds) s; exiting for a clean restart", level: .error)
        runtime.flushLog()
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

    /// The gate's limits and refusals, each exactly relay.md §2.3/§2.5's answer.
    static func gateLimits(_ configuration: RelayConfiguration) -> ConnectionGate.Limits {
        var limits = ConnectionGate.Limits()
        limits.socketRate = .init(limit: configuration.wsRateLimit, window: .milliseconds(configuration.wsRateWindowMs))
        limits.socketRateRefusal = .text(429, "rate limited")
        limits.maxSocketsPerIP = configuration.maxSocketsPerIP
        limits.perIPRefusal = .text(429, "too many connections")
        limits.maxTotalSockets = configuration.maxTotalSockets
        limits.totalRefusal = .text(503, "capacity")
        limits.requestLimits[Self.attestLimiter] = .init(.init(limit: configuration.attestRateLimit, window: .milliseconds(configuration.attestRateWindowMs)), refusal: .text(429, "rate limited"))
        return limits
    }

    /// The per-IP limiter of `/attest*` requests.
    static let attestLimiter = "attest"

    /// The admin listener's `/status`: occupancy, admissions and refusals, storage and sharding.
    static let statusPage = StatusPage(title: "tether relay", headline: [
        .init("relay_sockets_live", "Open sockets"), .init("relay_sockets_by_state{state=\"pending\"}", "Sockets being admitted"),
        .init("relay_sockets_by_state{state=\"parked\"}", "Sockets parked (peer absent)"),
        .init("relay_sockets_by_state{state=\"spliced\"}", "Sockets spliced"), .init("relay_rooms_live", "Resident rooms"),
        .init("relay_rooms_both", "Rooms with Mac and phone"), .init("relay_rooms_mac_only", "Rooms with a parked Mac only"),
        .init("relay_ws_upgrades_total", "Sockets admitted"), .init("relay_http_requests_total", "HTTP requests"),
        .init("relay_quota_exceeded_total", "Closed: quota exceeded"), .init("relay_phone_no_mac_total", "Closed: phone without a Mac"),
        .init("relay_ws_keepalive_terminated_total", "Closed: keepalive unanswered"), .init("relay_storage_errors_total", "Storage errors"),
        .init("relay_shard_map_version", "Shard map version"), .init("relay_process_exceptions_total", "Internal faults survived"),
        .init("process_resident_memory_bytes", "Memory (RSS)", unit: .bytes), .init("process_cpu_seconds_total", "CPU time", unit: .seconds),
        .init("process_open_fds", "Open descriptors"),
    ])

    /// Binds and starts serving; returns the bound port. Start-up reads the store directly (the
    /// shard map): nothing is being served yet, and this is not a loop thread.
    @discardableResult
    public func start() throws -> UInt16 {
        if let map = configuration.shardMap, try !store.publishShardMap(map) {
            write("relay: RELAY_SHARD_MAP version \(map.version) not published: the database already holds version \(try store.shardMap()?.version ?? 0), and versions only grow")
        }
        // A node holds a live lease before it accepts a socket, so no survivor has to count an
        // owner it was told about as lapsed.
        if let leases = store as? any NodeLeases {
            let started = clock.monotonic()
            renewed(try leases.renewLease(host: sharding.host, rules: leaseRules), startedAt: started)
            // A v1 cluster needs a map before any node can pass a room on: the first node to
            // start takes every bucket, and the others their shares as they settle.
            if configuration.cluster != nil, try store.shardMap() == nil, try store.publishShardMap(try ShardMap.single(host: sharding.host)) {
                write("relay: no shard map yet; published version 1 with this node (\(sharding.host)) owning every bucket")
            }
        }
        if let map = try store.shardMap(), sharding.adopt(map) {
            // Printed at start too: a node that came back after a failover says it owns nothing.
            metrics.shardMapAdopted(version: map.version)
            write(adoptedLine(map))
        }
        // Not in local mode: a newcomer's loopback relay never holds 200,000 sockets.
        if !configuration.local,
           let warning = Self.descriptorWarning(maxTotalSockets: configuration.maxTotalSockets, descriptorLimit: ProcessFigures.descriptorLimit()) {
            write(warning, level: .warning)
        }
        let started = try runtime.startListeners(group: group, settings: configuration, delegate: self,
                                                 metrics: MetricsSource { [weak self] done in self?.renderMetrics(done) }, status: Self.statusPage)
        try startClusterListener()
        startHousekeeping()
        startMetricsPush()
        startShardMapWatch()
        startLeases()
        return started.http.port
    }

    /// Descriptors a relay needs beyond its sockets: listeners, the store, logs, the admin
    /// listener and accepts in flight.
    static let descriptorReserve: Int64 = 256

    /// A cap the descriptor limit cannot honour is refused by the kernel at accept (`EMFILE`),
    /// not answered 503 `capacity` — the operator hears of it at start, not under load.
    static func descriptorWarning(maxTotalSockets: Int, descriptorLimit: Int64) -> String? {
        guard descriptorLimit > 0, Int64(maxTotalSockets) + descriptorReserve > descriptorLimit else { return nil }
        return "relay: RELAY_MAX_TOTAL_SOCKETS=\(maxTotalSockets) needs \(Int64(maxTotalSockets) + descriptorReserve) descriptors but the limit is \(descriptorLimit): "
            + "sockets past it fail at accept instead of 503 capacity; raise LimitNOFILE (ulimit -n) or lower the cap"
    }

    /// Graceful stop: not ready, no new connections, every room's sockets closed 1001 `server
    /// shutting down`, the rooms' last writes flushed to the store, the log flushed.
    public func shutdown() {
        runtime.beginDraining()
        runtime.listeners?.http.stopAccepting()
        clusterServer.withLock { $0 }?.stopAccepting()
        chores.stopAll()
        mapWatch.withLock { $0?.stop() }
        for (index, loop) in group.loops.enumerated() {
            let table = rooms[index], pipes = forwardedPipes[index]
            _ = try? loop.submitAndWait {
                table.closeAll(code: 1001, reason: "server shutting down")
                // A passed socket has no frame boundary this node knows of: its client sees the
                // connection end, and reconnects to whichever node the proxy picks.
                pipes.closeAll()
            }
        }
        runtime.stopListeners(grace: .seconds(5))
        clusterServer.withLock { $0 }?.shutdown(grace: .seconds(5))
        // The rooms' last writes (quota counts, cycle resets) reach the store before exit.
        storage.drain()
        runtime.flushLog()
    }

    // MARK: Rooms

    /// §2.2 step 6 / §2.3 step 5: a resident room is always served; a new one only under the cap.
    func hasRoomFor(_ room: RoomName) -> Bool {
        resident.withLock { $0.count < configuration.maxRooms || $0.contains(room.hashValue) }
    }

    func roomBecameResident(_ room: RoomName) { _ = resident.withLock { $0.insert(room.hashValue) } }
    func roomLeft(_ room: RoomName) { _ = resident.withLock { $0.remove(room.hashValue) } }

    /// Occupancy summed over every loop's rooms, each read on its own loop, then `done`.
    func occupancy(from index: Int = 0, adding sum: RelayMetrics.Occupancy = .init(),
                   _ done: @escaping @Sendable (RelayMetrics.Occupancy) -> Void) {
        guard index < group.loops.count else { return done(sum) }
        let table = rooms[index]
        group.loops[index].execute { [self] in occupancy(from: index + 1, adding: table.occupancy(adding: sum), done) }
    }

    /// A socket's place under the gate's caps is given back (it closed).
    func release(_ ip: String) { gate.releaseSocket(ip: ip) }

    var socketsLive: Int { gate.openSockets }

    func makeMachine(for room: RoomName, admissionWindow: FixedWindow?) -> RoomMachine {
        RoomMachine(room: room, context: machineContext, admissionWindow: admissionWindow)
    }

    static func machineContext(_ configuration: RelayConfiguration) -> RoomMachine.Context {
        var machine = RoomMachine.Configuration(origin: configuration.origin, attestationRequired: configuration.attestationRequired)
        machine.dailyByteQuota = configuration.dailyByteQuota
        // 1% of the idle TTL, however long or short (`activityGranularity`).
        machine.activityGranularity = .milliseconds(max(0, configuration.establishedIdleTTLms)) / 100
        machine.maxFramesPerSecond = configuration.maxFramesPerSecond
        return RoomMachine.Context(configuration: machine)
    }


    var webSocketOptions: WebSocketConnection.Options {
        var options = WebSocketConnection.Options()
        // The transport cap (§2.7): above it the socket closes 1009 before the room sees the frame.
        options.maxFramePayload = 524_288
        options.maxMessageSize = 524_288
        options.keepaliveInterval = .milliseconds(configuration.keepaliveMs)
        options.stallTimeout = .milliseconds(configuration.stallTimeoutMs)
        return options
    }

    // MARK: Log

    /// A line for the log at `level` (the level shows in the timestamp and json formats).
    func write(_ line: String, level: LogLevel = .info) { runtime.line(line, level: level) }

    /// A verbose-only line (still zero-PII: tags, never names, IPs or content).
    func diagnostic(_ line: @autoclosure () -> String) { runtime.diagnostic(line()) }
}
