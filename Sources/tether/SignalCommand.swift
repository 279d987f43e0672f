import Foundation
import TetherNet
import TetherService
import TetherSignal
import TetherStore

/// `tether signal`: runs the signaling server (signaling.md). State lives in memory only.
/// Synchronous, on the main thread: signals are blocked here before any other thread exists,
/// so only the watcher takes SIGTERM (from an async function this would be a pool thread, and
/// the main thread would still die of the signal).
func runSignalCommand(_ arguments: [String]) {
    answerHelpFlags(arguments, help: SignalConfiguration.helpText, markdown: SignalConfiguration.markdownReference)
    answerCheckFlag("signal", arguments, table: SignalConfiguration.settingsTable) { values throws(SettingError) in try SignalConfiguration.build(values).1 }
    let environment = ProcessInfo.processInfo.environment
    let configuration = loadSettings("signal", style: { ($0.logFormat, $0.logLevel) }) { () throws(SettingError) in try SignalConfiguration.load(environment: environment, arguments: arguments) }
    // Before the signals are blocked: a stop while it waits for the database ends it at once.
    let registry = configuration.database.map { url in
        openWaitingForDatabase("signal", setting: "SIGNAL_DB") { try PostgresSignalRegistry(pool: PostgresPool(PostgresPool.Settings(url: url))) }
    }
    SignalWatcher.blockHandledSignals()
    let group: EventLoopGroup
    let server: SignalServer
    let port: UInt16
    do {
        group = try EventLoopGroup()
        server = try SignalServer(configuration: configuration, group: group, registry: registry)
        port = try server.start()
    } catch {
        fail("signal: cannot start: \(error)", code: 1)
    }
    // Served over TLS from files or from ACME alike: the URL a client uses says so.
    let scheme = configuration.tlsCertificatePath == nil && configuration.acme == nil ? "ws" : "wss"
    StartLine.write(StartLine.line("signal", host: configuration.host, port: port,
                                   fields: ["\(scheme)://\(StartLine.address(configuration.host, port))/signal", "turn=\(configuration.turnMode.rawValue)"],
                                   tlsCertificate: configuration.tlsCertificatePath, acme: configuration.acme, adminPort: server.adminPort))
    serveUntilSignalled(server, adminHost: configuration.adminHost, group: group, settings: SignalConfiguration.settingsTable, arguments: arguments,
                        inPlace: configuration.inPlace) { values throws(SettingError) in try SignalConfiguration.build(values).0.inPlace }
}
