public import TetherNet
import Synchronization
import TetherSync

/// What every Tether service is around its own protocol, kept once here so the relay, the push
/// relay and the signaling server cannot drift apart: its log (a `LogSink` on standard error, or
/// a test's collector), verbose diagnostics (flipped by SIGUSR2), the `accepting` readiness check
/// that draining turns off, and its listeners (public, admin, ACME) with the SIGHUP reload and
/// the expiring-certificate warning. A service holds one and adopts `ChassisService`.
public final class ServiceRuntime: Sendable {
    /// `relay`, `push`, `signal`: the prefix of the service's own lines and the JSON `service`.
    public let name: String
    /// `/readyz` on the admin listener; `accepting` first, then whatever the service adds.
    public let readiness = ReadinessChecks()
    /// Where lines go: the process's own sink, or a test's collector.
    private enum Output: Sendable {
        case sink(LogSink)
        case collector(@Sendable (String) -> Void)
    }

    private let output: Output
    /// Lines below it are dropped; debug lines follow `verbose` instead. An index into
    /// `LogLevel.allCases`, so SIGHUP can change it while loops log.
    private let thresholdIndex: Atomic<UInt8>
    private let verboseFlag: Atomic<Bool>
    private let drainingFlag = Atomic<Bool>(false)
    private let started = Locked<ServiceListeners?>(nil)

    /// A runtime for the service `name`, its listeners not started.
    ///
    /// - Parameter name: the service (`relay`), as its log lines and metrics name it.
    /// - Parameter format: how log lines are written.
    /// - Parameter verbose: whether debug lines are written (SIGUSR2 toggles it).
    /// - Parameter log: where lines go (tests collect them); nil means a `LogSink` on standard
    ///   error, so a loop never waits on a slow stderr.
    /// - Parameter level: `*_LOG_LEVEL`: info, warning and error lines below it are not written.
    public init(name: String, format: LogFormat, verbose: Bool, level: LogLevel = .info, log: (@Sendable (String) -> Void)? = nil) {
        self.name = name
        output = log.map(Output.collector) ?? .sink(LogSink(name: name, format: format))
        thresholdIndex = Atomic(Self.index(of: level))
        verboseFlag = Atomic(verbose || level == .debug)
        readiness.register("accepting") { [weak self] in self.map { !$0.isDraining } ?? false }
        TLSServerContext.observeHandshakeFailures { [weak self] reason in self?.diagnostic("\(name): TLS handshake failed: \(reason)") }
    }

    // MARK: Listeners

    /// Binds the public listener (TLS from files or ACME) and, with a port, the admin listener;
    /// says in the log when the served certificate has expired or soon will.
    @discardableResult
    public func startListeners(group: EventLoopGroup, settings: some ServiceListenerSettings, delegate: any HTTPServerDelegate,
                               metrics: MetricsSource, status: StatusPage) throws -> ServiceListeners {
        let listeners = try ServiceListeners.start(group: group, configuration: settings, delegate: delegate, metrics: metrics,
                                                   readiness: readiness, status: status, service: name) { [weak self] text, level in self?.line(text, level: level) }
        started.withLock { $0 = listeners }
        if let warning = ServiceListeners.expiryWarning(certificatePath: settings.tlsCertificatePath, service: name) {
            line(warning, level: .warning)
        }
        return listeners
    }

    /// The listeners, once started.
    public var listeners: ServiceListeners? { started.withLock { $0 } }

    /// The admin listener's port, once started with one.
    public var adminPort: UInt16? { listeners?.admin?.port }

    /// SIGHUP: the certificate and key are read again (`ServiceListeners.reloadCertificates`);
    /// each resulting line is logged at its level and returned.
    @discardableResult
    public func reloadCertificates() -> [String] {
        let lines = listeners?.reloadCertificates(service: name) ?? [("\(name): SIGHUP: not serving yet", .info)]
        for (text, level) in lines { line(text, level: level) }
        return lines.map(\.text)
    }

    /// SIGHUP with new certificate paths in the settings: the pair is read from there, and
    /// `loaded` says whether it now serves (a failure leaves the old pair, logged at error).
    func reloadCertificates(certificateChainPath: String, privateKeyPath: String) -> (lines: [String], loaded: Bool) {
        guard let listeners else { return (reloadCertificates(), false) }
        let lines = listeners.reloadCertificates(service: name, certificateChainPath: certificateChainPath, privateKeyPath: privateKeyPath)
        for (text, level) in lines { line(text, level: level) }
        return (lines.map(\.text), !lines.contains { $0.level == .error })
    }

    /// The first step of every graceful stop: `/readyz` answers not ready from now on, so a load
    /// balancer sends new clients elsewhere while the service closes what it holds.
    public func beginDraining() { drainingFlag.store(true, ordering: .relaxed) }

    /// Whether ``beginDraining()`` was called.
    public var isDraining: Bool { drainingFlag.load(ordering: .relaxed) }

    /// The listeners close: the public one after `grace` for the connections still open, then
    /// the admin listener and ACME renewal.
    public func stopListeners(grace: Duration) {
        let listeners = self.listeners
        listeners?.http.shutdown(grace: grace)
        listeners?.admin?.shutdown()
        listeners?.acme?.stop()
    }

    // MARK: Log

    /// A line for the log at `level` (the level shows in the timestamp and json formats); the
    /// caller keeps it zero-PII: tags, never names, IPs, keys or content.
    public func line(_ text: String, level: LogLevel = .info) {
        guard level == .debug || Self.index(of: level) >= thresholdIndex.load(ordering: .relaxed) else { return }
        switch output {
        case let .sink(sink): sink.log(text, level: level)
        case let .collector(collect): collect(text)
        }
    }

    /// A verbose-only line, not even built while verbose logging is off.
    public func diagnostic(_ text: @autoclosure () -> String) {
        if verbose { line(text(), level: .debug) }
    }

    /// Verbose diagnostics (`RELAY_LOG`, `PUSH_LOG`, `SIGNAL_LOG`), flipped at runtime by SIGUSR2.
    public var verbose: Bool {
        get { verboseFlag.load(ordering: .relaxed) }
        set { verboseFlag.store(newValue, ordering: .relaxed) }
    }

    /// `*_LOG_LEVEL`, changed in place by SIGHUP (`SettingsReload`).
    public var logLevel: LogLevel {
        get { LogLevel.allCases[Int(thresholdIndex.load(ordering: .relaxed))] }
        set { thresholdIndex.store(Self.index(of: newValue), ordering: .relaxed) }
    }

    private static func index(of level: LogLevel) -> UInt8 { UInt8(LogLevel.allCases.firstIndex(of: level)!) }

    /// Lines dropped because the sink's queue was full (for a counter metric).
    public var droppedLogLines: Int {
        if case let .sink(sink) = output { sink.droppedLines } else { 0 }
    }

    /// Returns once every line logged so far is written (the end of a shutdown; a fault exit).
    public func flushLog() {
        if case let .sink(sink) = output { sink.flush() }
    }
}

/// A service built on the chassis: the host program (`tether relay|push|signal`) and the tests
/// reach the controls every service shares through its runtime.
public protocol ChassisService: AnyObject, Sendable {
    /// The service's log, readiness and listeners.
    var runtime: ServiceRuntime { get }
    /// Graceful stop: not ready, no new connections, what the service holds closed or flushed.
    func shutdown()
}

extension ChassisService {
    /// A line for the service's log from its host program (start-up, signals): zero-PII text only.
    public func note(_ line: String) { runtime.line(line) }

    /// Verbose diagnostics, as SIGUSR2 toggles them.
    public var verbose: Bool {
        get { runtime.verbose }
        set { runtime.verbose = newValue }
    }

    /// The admin listener's port, once started with one.
    public var adminPort: UInt16? { runtime.adminPort }

    /// SIGHUP: reads the certificate and key again; returns the lines logged.
    @discardableResult
    public func reloadCertificates() -> [String] { runtime.reloadCertificates() }
}
