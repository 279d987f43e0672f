import Synchronization
public import TetherCrypto
public import TetherNet
public import TetherService
public import TetherStore
import TetherSync
import TetherWire

/// The signaling server (signaling.md), built on the service chassis: the public listener and
/// its upgrade checks (`SignalServer+HTTP`), one `SignalSocket` per connection on its loop, the
/// directory of IDs in RAM, TURN credentials from a `TURNIssuer` under the issuance limits, the
/// gate's client-IP derivation and per-IP limits, and the optional admin listener. Nothing is
/// written to disk (§6.5). A library: `tether signal` only parses settings and runs one.
public final class SignalServer: HTTPServerDelegate, ChassisService {
    /// The settings the server was started with.
    public let configuration: SignalConfiguration
    /// The log, verbose flag, draining and listeners every service shares.
    public let runtime: ServiceRuntime
    /// The event loops the listeners and sockets run on.
    public let group: EventLoopGroup
    /// The clocks the server reads (the system's, or a test's).
    public let clock: ServiceClock
    /// Client-IP derivation, the per-IP limits and the socket caps.
    public let gate: ConnectionGate
    /// The server's series.
    public let metrics = SignalMetrics()
    /// The `/readyz` checks.
    public var readiness: ReadinessChecks { runtime.readiness }
    let issuer: any TURNIssuer
    let limiter = IssuanceLimiter()
    let directory = SignalDirectory()
    /// Several nodes as one (`SIGNAL_DB`); nil for a single node with its state in RAM.
    let cluster: SignalCluster?
    private let clusterServer = Locked<HTTPServer?>(nil)
    private let chores: Chores<String>
    let random: @Sendable (Int) -> [UInt8]
    private let sockets = Locked<[ObjectIdentifier: UncheckedTransfer<SignalSocket>]>([:])

    /// §6.4's per-IP limits.
    public static let maxSocketsPerIP = 16
    /// WebSocket upgrades one IP may make per ``upgradeWindow``.
    public static let upgradesPerIP = 60
    /// The window of ``upgradesPerIP``.
    public static let upgradeWindow: Duration = .seconds(60)

    /// A signaling server, not yet listening.
    ///
    /// - Parameters:
    ///   - configuration: the settings, as `SignalSetting` read them.
    ///   - group: the event loops the listeners and sockets run on.
    ///   - issuer: where credentials come from; nil: what the configuration's mode calls for.
    ///   - clock: the clocks the server reads (the system's, or a test's).
    ///   - random: the source of challenges (tests fix it).
    ///   - log: where lines go (tests collect them); nil means a `LogSink` on standard error.
    ///   - registry: the registry several nodes share; nil: `SIGNAL_DB`'s, if it is set.
    public init(configuration: SignalConfiguration, group: EventLoopGroup, issuer: (any TURNIssuer)? = nil, clock: ServiceClock = .system,
                random: @escaping @Sendable (Int) -> [UInt8] = { SecureRandom.bytes($0) },
                log: (@Sendable (String) -> Void)? = nil, registry: (any SignalRegistry)? = nil) throws {
        self.configuration = configuration
        self.group = group
        self.clock = clock
        self.random = random
        self.issuer = try issuer ?? configuration.issuer(loops: group.loops)
        let runtime = ServiceRuntime(name: "signal", format: configuration.logFormat, verbose: configuration.verboseLog,
                                 level: configuration.logLevel, log: log)
        self.runtime = runtime
        var limits = ConnectionGate.Limits()
        limits.socketRate = .init(limit: Self.upgradesPerIP, window: Self.upgradeWindow)
        limits.maxSocketsPerIP = Self.maxSocketsPerIP
        limits.maxTotalSockets = configuration.maxSockets
        // §13.1: total sockets, then per-IP sockets, then the upgrade rate.
        limits.socketCheckOrder = [.total, .perIP, .rate]
        gate = ConnectionGate(clientIP: configuration.clientIP, limits: limits, clock: clock) { [runtime] what, refusal in
            runtime.diagnostic("signal: refused a \(what): \(refusal.reason) (\(refusal.response.status))")
        }
        chores = Chores(loop: group.loops[0])
        let shared: (any SignalRegistry)?
        if let registry {
            shared = registry
        } else if let url = configuration.database {
            shared = try PostgresSignalRegistry(pool: PostgresPool(PostgresPool.Settings(url: url)))
        } else {
            shared = nil
        }
        let logLine: @Sendable (String) -> Void = { runtime.line($0) }, directory = self.directory
        cluster = shared.map { registry in
            SignalCluster(node: configuration.nodeURL ?? "", registry: registry, secret: configuration.clusterSecret ?? "",
                          leaseTTLms: configuration.leaseTTLms, directory: directory, loops: group.loops,
                          clock: clock, log: logLine)
        }
        metrics.register(sockets: { [weak self] in self?.openSockets ?? 0 }, routable: { [directory] in directory.routableCount },
                         issuing: { [limiter] in limiter.inFlight }, droppedLogLines: { [runtime] in runtime.droppedLogLines })
        if let cluster { readiness.register("registry") { cluster.health.isAvailable } }
    }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        let started = try runtime.startListeners(group: group, settings: configuration, delegate: self, metrics: .registry(metrics.registry),
                                                 status: StatusPage(title: "tether signal", headline: [
                                                     .init("signal_sockets", "Open sockets"), .init("signal_routable_ids", "Reachable IDs"),
                                                     .init("signal_upgrades_total", "Sockets admitted"), .init("signal_registrations_total", "Registrations"),
                                                     .init("signal_presence_queries_total", "Presence queries"),
                                                     .init("signal_issuances_in_flight", "TURN credentials being issued"),
                                                     .init("process_resident_memory_bytes", "Memory (RSS)", unit: .bytes),
                                                     .init("process_cpu_seconds_total", "CPU time", unit: .seconds),
                                                 ]))
        if let cluster { try startCluster(cluster) }
        return started.http.port
    }

    /// The cluster listener, and the lease renewed every second from now on.
    private func startCluster(_ cluster: SignalCluster) throws {
        try cluster.start()
        var settings = HTTPServer.Configuration()
        settings.host = configuration.clusterHost
        settings.port = configuration.clusterPort ?? 0
        let server = HTTPServer(group: group, configuration: settings, delegate: ClusterListener(cluster: cluster))
        let port = try server.start()
        clusterServer.withLock { $0 = server }
        chores.start("lease", every: SignalCluster.leaseRenewInterval) { cluster.renewLease() }
        line("signal: cluster node \(cluster.node): listening for other nodes on \(configuration.clusterHost):\(port), lease \(cluster.leaseTTLms) ms")
    }

    /// The cluster listener's port, once started.
    public var clusterPort: UInt16? { clusterServer.withLock { $0?.port } }

    /// SIGTERM: not ready, no new connections, every socket closed 1001 `shutting_down` (§13.1),
    /// the close frames given a moment to leave, the log flushed.
    public func shutdown() {
        runtime.beginDraining()
        for socket in sockets.withLock({ Array($0.values) }) {
            socket.value.loop.execute { socket.value.shutDown() }
        }
        runtime.stopListeners(grace: .seconds(2))
        clusterServer.withLock { $0 }?.shutdown(grace: .seconds(1))
        // This node's IDs go now, not when its lease lapses: their owners reconnect elsewhere.
        if let cluster { try? cluster.registry.store.forget(node: cluster.node) }
        runtime.flushLog()
    }

    // MARK: Sockets

    func opened(_ socket: SignalSocket) {
        sockets.withLock { $0[ObjectIdentifier(socket)] = UncheckedTransfer(socket) }
        metrics.upgrades.increment()
    }

    func closed(_ socket: SignalSocket) {
        _ = sockets.withLock { $0.removeValue(forKey: ObjectIdentifier(socket)) }
    }

    /// How many signaling sockets are open now.
    public var openSockets: Int { sockets.withLock { $0.count } }

    /// Starts the credential issuance of a registration (§6.1 step 7) under the limits of §8.1;
    /// the result comes back on the socket's loop.
    func issue(for socket: SignalSocket, id: SignalingID) -> (any IssuanceHandle)? {
        let limited = issuer.isLimited
        let loop = socket.loop
        let confined = UncheckedTransfer(socket)
        if limited, !limiter.start(now: clock.monotonic()) {
            metrics.issuances.labels(IssuanceFailure.Reason.overLimit.rawValue).increment()
            let failure = IssuanceFailure(.overLimit, "issuance limits reached")
            loop.execute { confined.value.issued(.failure(failure), id: id) }
            return nil
        }
        let started = clock.monotonic()
        return issuer.issue(now: clock.wall().unixSeconds) { [self] result in
            if limited { limiter.finish() }
            metrics.issuanceLatency.observe(clock.monotonic().elapsed(since: started).secondsDouble)
            switch result {
            case .success: metrics.issuances.labels("issued").increment()
            case let .failure(failure): metrics.issuances.labels(failure.reason.rawValue).increment()
            }
            loop.execute { confined.value.issued(result, id: id) }
        }
    }

    // MARK: Log

    func diagnostic(_ text: @autoclosure () -> String) { runtime.diagnostic(text()) }

    /// A line at `level` (the level shows in the timestamp and json formats).
    func line(_ text: String, level: LogLevel = .info) { runtime.line(text, level: level) }
}
