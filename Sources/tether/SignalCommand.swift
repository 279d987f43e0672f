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
    var arguments = arguments
    answerHelpFlags(arguments, help: SignalConfiguration.helpText, markdown: SignalConfiguration.markdownReference)
    let environment = serviceEnvironment(&arguments, command: "signal")
    let configuration = loadSettings("signal") { () throws(SettingError) in try SignalConfiguration.load(environment: environment, arguments: arguments) }
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
    let scheme = configuration.tlsCertificatePath == nil ? "ws" : "wss"
    let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    FileHandle.standardOutput.write(Data("signal: listening on \(configuration.host):\(port) (\(scheme)://\(host):\(port)/signal, turn=\(configuration.turnMode.rawValue)) tether \(TetherVersion.current)\n".utf8))
    serveUntilSignalled(server, adminHost: configuration.adminHost, group: group)
}
