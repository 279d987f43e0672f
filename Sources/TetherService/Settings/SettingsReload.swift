import TetherSync

/// The settings a running service takes in place on SIGHUP. Everything else shapes listeners,
/// stores or limits already handed to loops, so it waits for a restart (and is named as waiting).
public struct InPlaceSettings: Equatable, Sendable {
    /// `*_LOG_LEVEL`.
    public var logLevel: LogLevel
    /// `*_LOG` (or a `debug` level).
    public var verbose: Bool
    /// `*_TLS_CERT` and `*_TLS_KEY`: a renewal that writes to new paths needs no restart.
    public var tlsCertificatePath: String?
    /// The private key that goes with ``tlsCertificatePath``.
    public var tlsKeyPath: String?

    /// The settings in place, as read at start-up or by a reload.
    public init(logLevel: LogLevel, verbose: Bool, tlsCertificatePath: String?, tlsKeyPath: String?) {
        self.logLevel = logLevel
        self.verbose = verbose
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
    }
}

/// A service's built settings, as far as SIGHUP is concerned.
public protocol ReloadableSettings: ServiceListenerSettings {
    /// The threshold a line must reach to be written (`*_LOG_LEVEL`).
    var logLevel: LogLevel { get }
    /// Verbose diagnostics (`*_LOG`).
    var verboseLog: Bool { get }
}

extension ReloadableSettings {
    /// The settings SIGHUP applies without a restart, as configured.
    public var inPlace: InPlaceSettings {
        InPlaceSettings(logLevel: logLevel, verbose: verboseLog, tlsCertificatePath: tlsCertificatePath, tlsKeyPath: tlsKeyPath)
    }
}

/// SIGHUP: the settings read again (the `--config` file; the environment is the process's own),
/// the in-place ones applied, the certificate reloaded, and each other change named as waiting
/// for a restart. A file that no longer reads, or no longer builds, changes nothing but the
/// certificate (its files are the renewal's, not the settings file's).
public final class SettingsReload: Sendable {
    /// Builds the service's configuration from freshly read values and returns what can change in
    /// place; throws as start-up would.
    public typealias Reread = @Sendable (SettingValues) throws(SettingError) -> InPlaceSettings

    private let table: SettingsTable
    private let arguments: [String]
    private let started: SettingValues?
    private let reread: Reread
    /// What is in effect now: the start's, then each reload's.
    private let running: Locked<InPlaceSettings>

    /// A reload for a service started with `arguments` against `table`; `started` is the values
    /// start-up read (nil: changes that wait for a restart are not named), `running` what is in
    /// effect, and `reread` builds the in-place settings from values read again.
    public init(table: SettingsTable, arguments: [String], started: SettingValues?, running: InPlaceSettings, reread: @escaping Reread) {
        self.table = table
        self.arguments = arguments
        self.started = started
        self.reread = reread
        self.running = Locked(running)
    }

    /// Applies what changed to `runtime` and returns the lines it logged.
    @discardableResult
    public func reload(_ runtime: ServiceRuntime) -> [String] {
        let name = runtime.name
        let now: SettingValues, fresh: InPlaceSettings
        do throws(SettingError) {
            now = try table.load(arguments: arguments)
            fresh = try reread(now)
        } catch {
            return runtime.reloadCertificates() + log(runtime, "\(name): warning: SIGHUP: \(error); the settings in use stay as they are", .warning)
        }
        let prefix = name.uppercased()
        let old = running.withLock { $0 }
        var lines: [String] = []

        if fresh.logLevel != old.logLevel {
            // Said under whichever threshold shows it: before a raise, after a lowering.
            let line = "\(name): SIGHUP: \(prefix)_LOG_LEVEL is now \(fresh.logLevel.rawValue)"
            if old.logLevel <= .info { lines += log(runtime, line, .info) }
            runtime.logLevel = fresh.logLevel
            if old.logLevel > .info { lines += log(runtime, line, .info) }
        }
        if fresh.verbose != old.verbose {
            runtime.verbose = fresh.verbose
            lines += log(runtime, "\(name): SIGHUP: verbose logging \(fresh.verbose ? "on" : "off") (\(prefix)_LOG)", .info)
        }

        var inEffect = fresh
        let pathsChanged = fresh.tlsCertificatePath != old.tlsCertificatePath || fresh.tlsKeyPath != old.tlsKeyPath
        if pathsChanged, let chain = fresh.tlsCertificatePath, let key = fresh.tlsKeyPath,
           let listeners = runtime.listeners, listeners.tls != nil, listeners.acme == nil {
            let reloaded = runtime.reloadCertificates(certificateChainPath: chain, privateKeyPath: key)
            lines += reloaded.lines
            if !reloaded.loaded { (inEffect.tlsCertificatePath, inEffect.tlsKeyPath) = (old.tlsCertificatePath, old.tlsKeyPath) }
        } else {
            // Plain listeners cannot start TLS, nor TLS ones stop it: those wait for a restart.
            lines += runtime.reloadCertificates()
            (inEffect.tlsCertificatePath, inEffect.tlsKeyPath) = (old.tlsCertificatePath, old.tlsKeyPath)
        }
        running.withLock { $0 = inEffect }

        // What differs from the start is waiting, unless it is in effect now: the log settings
        // always are, the certificate paths once a reload took them (this one or an earlier one).
        guard let started else { return lines }
        var inPlace: Set<String> = ["\(prefix)_LOG", "\(prefix)_LOG_LEVEL"]
        if inEffect.tlsCertificatePath == fresh.tlsCertificatePath, inEffect.tlsKeyPath == fresh.tlsKeyPath {
            inPlace.formUnion(["\(prefix)_TLS_CERT", "\(prefix)_TLS_KEY"])
        }
        let waiting = table.knownNames.filter { started.texts[$0] != now.texts[$0] && !inPlace.contains($0) }.sorted()
        for setting in waiting {
            lines += log(runtime, "\(name): warning: SIGHUP: \(setting) changed; it takes effect at the next restart (in place: the log level, verbose logging, the certificate files)", .warning)
        }
        return lines
    }

    private func log(_ runtime: ServiceRuntime, _ line: String, _ level: LogLevel) -> [String] {
        runtime.line(line, level: level)
        return [line]
    }
}
