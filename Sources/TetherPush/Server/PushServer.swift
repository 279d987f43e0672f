import Synchronization
public import TetherCrypto
public import TetherNet
public import TetherService
public import TetherStore
import TetherSync

/// The push relay (push.md), built on the service chassis: the public HTTP listener (routing and
/// both profiles in `PushServer+HTTP`, `+Mytty`, `+ITerm`), registrations on `StoreExecutor`
/// lanes, APNs through `APNsClient` on its own thread, the gate's client-IP derivation and
/// limits, housekeeping on `Chores`, and the optional admin listener. No store call and no APNs
/// call ever runs on an event loop. A library: `tether push` only parses settings and runs one.
public final class PushServer: HTTPServerDelegate, ChassisService {
    /// The settings the push relay was started with.
    public let configuration: PushConfiguration
    /// The log, verbose flag, draining and listeners every service shares.
    public let runtime: ServiceRuntime
    /// The event loops the listeners run on.
    public let group: EventLoopGroup
    /// Registrations: read and written on store lanes, never on a loop.
    public let storage: StoreExecutor<any PushStore>
    /// The APNs client, on its own thread.
    public let apns: APNsClient
    /// The clocks the relay reads (the system's, or a test's).
    public let clock: ServiceClock
    /// Client-IP derivation (relay.md §2.4 under `PUSH_` names) and Profile I's `/register` limit.
    public let gate: ConnectionGate
    /// The `pushrelay_*` series.
    public let metrics: PushMetrics
    /// The `/readyz` checks.
    public var readiness: ReadinessChecks { runtime.readiness }
    /// Whether the store answers (a shared database can be down while the relay runs on).
    public let storageHealth = StoreHealth()
    let routes = Locked(Router())
    /// Profile I: authenticated pushes per token per 60 s (§1.1).
    let pushWindows: Locked<FixedWindowLimiter<String>>
    /// Profile M registrations renewed within the hour (renewal writes, throttled).
    let renewals = Locked(RenewalThrottle())
    /// Profile M registrations read lately (authentic pushes skip the store round trip).
    let myttyCache = RegistrationCache<MyttyRegistration>()
    let chores: Chores<String>
    let random: @Sendable (Int) -> [UInt8]
    /// Operator warnings already given, by reason, with when (monotonic ms): one a minute each.
    private let warned = Locked<[String: MonotonicInstant]>([:])

    /// Store lanes by default. SQLite serialises its one connection, so more lanes would only
    /// contend for its lock (and wake more threads per push); a networked store passes more.
    public static let defaultStoreLanes = 1
    /// Storage work queued past this many calls means the store has fallen behind.
    static let storageBacklogLimit = 10_000
    /// Expired registrations are pruned (and the device gauge refreshed) this often.
    static let housekeepingInterval: Duration = .seconds(60)
    static let registerLimiter = "register"
    static let myttyRegisterLimiter = "mytty_register"

    /// A push relay, not yet listening.
    ///
    /// - Parameters:
    ///   - configuration: the settings, as `PushSetting` read them.
    ///   - group: the event loops the listeners run on.
    ///   - store: where registrations are kept.
    ///   - transport: the HTTP/2 client to APNs (libcurl's in the service, a double in tests).
    ///   - clock: the clocks the relay reads (the system's, or a test's).
    ///   - storeLanes: storage threads (a registration's work always runs on one of them, in order).
    ///   - random: the source of push IDs and relay secrets (tests fix it).
    ///   - log: where lines go (tests collect them); nil means a `LogSink` on standard error.
    public init(configuration: PushConfiguration, group: EventLoopGroup, store: any PushStore, transport: any HTTP2Transport,
                clock: ServiceClock = .system, storeLanes: Int = PushServer.defaultStoreLanes,
                random: @escaping @Sendable (Int) -> [UInt8] = { SecureRandom.bytes($0) },
                log: (@Sendable (String) -> Void)? = nil) throws(SettingError) {
        guard let key = configuration.key else { throw SettingError(variable: "APNS_PRIVATE_KEY", message: "required") }
        self.configuration = configuration
        self.group = group
        self.clock = clock
        self.random = random
        storage = StoreExecutor(store: store, lanes: storeLanes)
        let runtime = ServiceRuntime(name: "push", format: configuration.logFormat, verbose: configuration.verboseLog,
                                 level: configuration.logLevel, log: log)
        self.runtime = runtime
        let metrics = PushMetrics()
        self.metrics = metrics
        apns = APNsClient(transport: transport, tokens: ProviderTokenIssuer(key: key, keyID: configuration.keyID, teamID: configuration.teamID),
                          endpoints: configuration.endpoints, clock: clock,
                          observe: { outcome, latency in metrics.apnsFinished(outcome, latency: latency) })
        var limits = ConnectionGate.Limits()
        limits.requestLimits[Self.registerLimiter] = .init(.init(limit: configuration.registerLimit, window: ITermProfile.window),
                                                           refusal: ITermProfile.rateLimited.response)
        limits.requestLimits[Self.myttyRegisterLimiter] = .init(.init(limit: configuration.registerRateLimit, window: MyttyProfile.registerWindow),
                                                                refusal: MyttyProfile.rateLimited.response)
        limits.maxSocketsPerIP = configuration.maxConnectionsPerIP > 0 ? configuration.maxConnectionsPerIP : .max
        limits.perIPRefusal = Self.tooManyConnections.response
        gate = ConnectionGate(clientIP: configuration.clientIP, limits: limits, clock: clock) { [runtime] what, refusal in
            runtime.diagnostic("push: refused a \(what): \(refusal.reason) (\(refusal.response.status))")
        }
        pushWindows = Locked(FixedWindowLimiter(limit: ITermProfile.pushesPerWindow, window: ITermProfile.window))
        chores = Chores(loop: group.loops[0])
        let router = Self.router(for: self)
        routes.withLock { $0 = router }
        metrics.register(storageBacklog: { [storage] in storage.backlog }, apnsConnections: { [transport] in transport.connectionsOpened },
                         tokensMinted: { [apns] in apns.tokens.mintCount }, droppedLogLines: { [runtime] in runtime.droppedLogLines })
        readiness.register("storage") { [storage, storageHealth] in storageHealth.isAvailable && storage.backlog < Self.storageBacklogLimit }
    }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        let started = try runtime.startListeners(group: group, settings: configuration, delegate: self, metrics: .registry(metrics.registry),
                                                 status: StatusPage(title: "tether push", headline: [
                                                     .init("pushrelay_devices", "Registered devices"), .init("pushrelay_push_total", "Push requests"),
                                                     .init("pushrelay_push_delivered_total", "Pushes APNs accepted"),
                                                     .init("pushrelay_push_apns_error_total", "Pushes APNs refused or missed"),
                                                     .init("pushrelay_register_total", "Registration requests"),
                                                     .init("pushrelay_rate_limited_total", "Refused: rate limited"),
                                                     .init("pushrelay_store_backlog", "Storage calls queued"),
                                                     .init("process_resident_memory_bytes", "Memory (RSS)", unit: .bytes),
                                                     .init("process_cpu_seconds_total", "CPU time", unit: .seconds),
                                                 ]))
        chores.start("housekeeping", every: Self.housekeepingInterval, runNow: true) { [weak self] in self?.housekeeping() }
        chores.start("storage probe", every: Self.storageProbeInterval) { [weak self] in self?.probeStorage() }
        return started.http.port
    }

    /// Graceful stop: not ready, no new connections, requests in progress answered (their APNs
    /// calls finish or time out), the store's last writes done, the log flushed.
    public func shutdown() {
        runtime.beginDraining()
        chores.stopAll()
        runtime.stopListeners(grace: .seconds(12))
        apns.transport.shutdown()
        storage.drain()
        runtime.flushLog()
    }

    /// How often the store is asked whether it answers: while it is failing, one write that
    /// leaves nothing behind (a read is no proof: a full disk answers reads), so `/readyz` turns
    /// ready again within this of the database's return; while it answers, the cheapest call, so
    /// a database that hangs turns `/readyz` not-ready within this plus a call's deadline even
    /// when no request comes in.
    static let storageProbeInterval: Duration = .seconds(1)

    func probeStorage() {
        let failing = !storageHealth.isAvailable
        storage.submit(lane: 0) { [self] store in
            do {
                if failing {
                    try store.probeWrite()
                    storageAnswered()
                } else {
                    try store.probeAnswer()
                }
            } catch {
                // Logged once per outage, when it began.
                if !failing { storageFailed(error) }
            }
        }
    }

    /// Prunes expired registrations (push.md §6) and refreshes the device gauge, on a lane.
    func housekeeping() {
        let now = clock.wall().unixMilliseconds
        storage.submit(lane: 0) { [self] store in
            do {
                let pruned = try store.pruneExpired(now: now)
                metrics.devices.set(Int64(try store.deviceCount(now: now)))
                if pruned > 0 { diagnostic("push: housekeeping pruned \(pruned) expired registration\(pruned == 1 ? "" : "s")") }
            } catch {
                storageFailed(error)
            }
        }
    }

    // MARK: Log

    func diagnostic(_ text: @autoclosure () -> String) { runtime.diagnostic(text()) }

    /// A line at `level` (the level shows in the timestamp and json formats).
    func line(_ text: String, level: LogLevel = .info) { runtime.line(text, level: level) }

    /// An internal fault the relay survived (a storage error): counted and logged, zero-PII.
    /// A store call failed; the request has already been answered with the error. Counted, seen
    /// on `/readyz`, and logged once per outage — not a fault per call: a database that is down
    /// for a minute must not flood the log.
    func storageFailed(_ error: any Error) {
        metrics.storageErrors.increment()
        metrics.storageAvailable.set(0)
        let failure = error as? StoreError ?? StoreError("\(error)")
        if case .failing? = storageHealth.failed(failure) {
            line("push: storage unavailable: \(failure.message); answering what needs it with an error until it returns", level: .error)
        }
    }

    /// A store call succeeded: ends an outage.
    func storageAnswered() {
        guard case let .recovered(failures)? = storageHealth.succeeded() else { return }
        metrics.storageAvailable.set(1)
        line("push: storage available again (\(failures) calls failed meanwhile)")
    }

    /// An operator-facing warning (APNs refuses the relay's configuration), at most once a minute
    /// per `key` so a failing key does not flood the log.
    func warn(_ key: String, _ line: String) {
        let now = clock.monotonic()
        let due = warned.withLock { warned -> Bool in
            if let last = warned[key], now < last + .seconds(60) { return false }
            warned[key] = now
            return true
        }
        if due { self.line(line) }
    }
}
