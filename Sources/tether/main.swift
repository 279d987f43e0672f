// tether: the command-line shell. It parses configuration and wires libraries together; the
// protocols live in the Tether* modules.
import CTetherSystem
import Foundation
import Glibc
import TetherNet
import TetherPush
import TetherSignal
import TetherRelay
import TetherService
import TetherStore
import TetherWire

func fail(_ message: String, code: Int32 = 2) -> Never {
    // A service that read its settings refuses in its own log format (its message starts with
    // the service's name); anything earlier is a plain line.
    let text = ServiceOutput.isFormatted ? ServiceOutput.rendered(message, level: .error) : "tether: \(message)\n"
    FileHandle.standardError.write(Data(text.utf8))
    leave(code)
}

/// Ends a client command whose event loops may still be running. exit(3) would run the atexit
/// handlers, and OpenSSL's frees the global locks a loop thread may be taking that moment (a
/// Ctrl-C on `tether mac` crashed in pthread_rwlock_wrlock(NULL) now and then), so standard
/// output is flushed and the process leaves without its teardown.
func leave(_ code: Int32) -> Never {
    if code != 0 { FreshPairingState.removeUnpaired() }
    tether_flush_standard_output()
    _exit(code)
}

let usage = """
usage: tether <command> [options]

commands:
  relay     run the companion relay (tether relay --help)
  push      run the push relay for APNs, or send a test notification through one (tether push --help)
  signal    run the signaling server: signed call setup, presence, TURN credentials (tether signal --help)
  shardmap  show or publish the resolver v2 shard map in a relay database (tether shardmap --help)
  db        show, or apply, what a service's PostgreSQL schema lacks (tether db --help)
  mac       the Mac side: show a pairing link and QR code, then chat (tether mac --help)
  phone     the phone side: pair from a link, show the code, then chat (tether phone --help)
  unpair    end a pairing, on either side (tether unpair --help)
  id        show this device's calling ID and contact link, made on first use (tether id --help)
  presence  ask a signaling server which contacts are online, for scripts (tether presence --help)
  call      call a contact over WebRTC through a signaling server, then chat (tether call --help)
  answer    wait for a call, accept or decline it, then chat (tether answer --help)
  demo      watch a whole pairing on a local relay, narrated (tether demo --help); tether demo call: a call
  attester  make a software App Attest root for tests (tether attester --help)

tether --version prints the release; tether <command> --help (or tether help <command>) explains a command.

"""

var arguments = Array(CommandLine.arguments.dropFirst())
guard var command = arguments.first else {
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
arguments.removeFirst()
if ["--help", "-h", "help"].contains(command) {
    // `tether help relay` is `tether relay --help`.
    guard let topic = arguments.first, !topic.hasPrefix("-") else {
        print(usage, terminator: "")
        exit(0)
    }
    command = topic
    arguments = ["--help"]
}
if command == "--help-man" {
    // The package's tether(1), generated from the usage and the three settings tables.
    print(ManPage.text(usage: usage), terminator: "")
    exit(0)
}
if command == "--version" || ((command == "relay" || command == "push" || command == "signal") && arguments.contains("--version")) {
    print("tether \(TetherVersion.current)")
    exit(0)
}

/// The environment with an env-file (`--config`, the reference's /etc/iterm2-companion-relay.env)
/// beneath it; removes `--config FILE` from `arguments`.
func serviceEnvironment(_ arguments: inout [String], command: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    if let index = arguments.firstIndex(of: "--config") {
        guard index + 1 < arguments.count, let text = try? String(contentsOfFile: arguments[index + 1], encoding: .utf8) else {
            fail("\(command): --config needs a readable env-file")
        }
        environment = RelayConfiguration.parseEnvironmentFile(text).merging(environment) { _, fromEnvironment in fromEnvironment }
        arguments.removeSubrange(index...(index + 1))
    }
    return environment
}

/// What `tether relay`, `tether push` and `tether signal` do alike once their server runs: the
/// admin listener is named, SIGHUP reloads the certificate and applies the in-place settings
/// (`SettingsReload`: the others changed are named as waiting for a restart), SIGUSR2 flips verbose logging,
/// SIGTERM/SIGINT/SIGQUIT drain and exit 0.
func serveUntilSignalled(_ service: some ChassisService, adminHost: String, group: EventLoopGroup,
                         settings table: SettingsTable, arguments: [String], inPlace: InPlaceSettings,
                         reread: @escaping SettingsReload.Reread) -> Never {
    let name = service.runtime.name
    if let admin = service.adminPort {
        service.note("\(name): admin listener on \(adminHost):\(admin) (/metrics, /healthz, /readyz)")
    }
    let reload = SettingsReload(table: table, arguments: arguments, started: try? table.load(arguments: arguments),
                                running: inPlace, reread: reread)
    let signals = SignalWatcher(handlers: .init(
        reload: { reload.reload(service.runtime) },
        toggleVerbose: {
            service.verbose.toggle()
            service.note("\(name): verbose logging \(service.verbose ? "on" : "off") (SIGUSR2)")
        }))
    signals.waitForShutdown()
    service.note("\(name): shutting down")
    service.shutdown()
    group.shutdown()
    exit(0)
}

/// A port the kernel calls free on `host`, learned by binding a socket to port 0 and closing it,
/// so a server can know its port (and its origin) before it starts.
enum PortProbe {
    static func freePort(host: String) -> UInt16? {
        let v6 = host.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var storage = sockaddr_storage()
        var length: socklen_t
        if v6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { return nil }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeBytes(of: address) { raw in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) } }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return nil }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: address) { raw in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) } }
        }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) } }
        guard bound == 0,
              withUnsafeMutablePointer(to: &storage, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
        else { return nil }
        return withUnsafeBytes(of: storage) { raw in UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)) }
    }
}

/// A service's settings, or a one-line refusal naming the setting (exit 2); from then on the
/// command writes in the service's log format and level (`style`), and the start-up notes go to
/// standard error in it (a `warning: …` note at warning level).
func loadSettings<Configuration>(_ name: String, style: (Configuration) -> (LogFormat, LogLevel),
                                 _ load: () throws(SettingError) -> (Configuration, [String])) -> Configuration {
    do {
        let (configuration, notes) = try load()
        let (format, level) = style(configuration)
        ServiceOutput.adopt(service: name, format: format, level: level)
        for note in notes { ServiceOutput.note("\(name): \(note)", level: note.hasPrefix("warning") ? .warning : .info) }
        return configuration
    } catch {
        fail("\(name): \(error)")
    }
}

/// `tether <service> --check`: the settings in effect and where each came from, then every
/// problem (exit 2) or `settings ok` (exit 0); returns when `--check` is not among `arguments`.
func answerCheckFlag(_ name: String, _ arguments: [String], table: SettingsTable,
                     build: (SettingValues) throws(SettingError) -> [String]) {
    guard arguments.contains(SettingsTable.checkFlag) else { return }
    let values: SettingValues
    do { values = try table.load(arguments: arguments.filter { $0 != SettingsTable.checkFlag }) } catch { fail("\(name): \(error)") }
    let (lines, problems, advice) = table.checkReport(values, build: build)
    print(lines.joined(separator: "\n"))
    fflush(nil)  // every stream: the settings before the warnings, in one merged log
    for line in problems + advice { FileHandle.standardError.write(Data("\(name): \(line)\n".utf8)) }
    guard problems.isEmpty else { exit(2) }
    print(advice.isEmpty ? "\(name): settings ok" : "\(name): settings ok (\(advice.count) warning\(advice.count == 1 ? "" : "s") above)")
    exit(0)
}

/// `--help` and `--help-markdown`, answered from a service's settings table; returns otherwise.
func answerHelpFlags(_ arguments: [String], help: String, markdown: String) {
    if arguments.contains("--help") || arguments.contains("-h") {
        print(help)
        exit(0)
    }
    if arguments.contains("--help-markdown") {
        print(markdown, terminator: "")
        exit(0)
    }
}

switch command {
case "mac": await runMacCommand(arguments)
case "phone": await runPhoneCommand(arguments)
case "unpair": await runUnpairCommand(arguments)
case "demo":
    if arguments.first == "call" { await runDemoCallCommand(Array(arguments.dropFirst())) } else { await runDemoCommand(arguments) }
case "attester": runAttesterCommand(arguments)
case "id": runIdCommand(arguments)
case "push":
    if arguments.first == "send" { await runPushSendCommand(Array(arguments.dropFirst())) } else { runPushCommand(arguments) }
case "signal": runSignalCommand(arguments)
case "presence": await runPresenceCommand(arguments)
case "call": await runCallCommand(arguments)
case "answer": await runAnswerCommand(arguments)
case "shardmap": runShardmapCommand(arguments)
case "db": runDbCommand(arguments)
case "relay":
    // Both generated from the relay's settings table (TetherService).
    answerHelpFlags(arguments, help: RelayConfiguration.helpText, markdown: RelayConfiguration.markdownReference)
    answerCheckFlag("relay", arguments, table: RelayConfiguration.settingsTable) { values throws(SettingError) in try RelayConfiguration.build(values).1 }
    let environment = ProcessInfo.processInfo.environment
    var configuration = loadSettings("relay", style: { ($0.logFormat, $0.logLevel) }) { () throws(SettingError) in try RelayConfiguration.load(environment: environment, arguments: arguments) }
    // `--local --relay-port 0`: the origin (bound into every signature) needs the real port before
    // the relay starts, so the kernel picks a free one first.
    if configuration.port == 0, configuration.originFollowsBinding {
        guard let chosen = PortProbe.freePort(host: configuration.host) else { fail("relay: cannot find a free port on \(configuration.host)", code: 1) }
        configuration = configuration.bound(to: chosen)
        ServiceOutput.note("relay: local mode: listening on \(StartLine.address(configuration.host, chosen)) only, open admission (no App Attest), origin \(configuration.origin), database \(configuration.databasePath) in the working directory", level: .info)
    }
    let store: any RoomStore = openWaitingForDatabase("relay", setting: "RELAY_DB") { try StoreLocation(configuration.databasePath).openRoomStore() }
    // Before any thread exists, so every loop, lane and writer inherits the blocked signals and
    // only the watcher thread takes them.
    SignalWatcher.blockHandledSignals()
    let group: EventLoopGroup
    let relay: RelayServer
    let port: UInt16
    do {
        // One loop per core, TLS included (a TLS session moves to its room's loop with its socket).
        group = try EventLoopGroup()
        relay = RelayServer(configuration: configuration, group: group, store: store)
        relay.onFaultBudgetExceeded = { exit(1) }
        port = try relay.start()
    } catch {
        fail("relay: cannot start: \(error)", code: 1)
    }
    // What the relay does, not what was typed: only the exact value false turns attestation off.
    let attest = configuration.attestationRequired ? "required" : "false"
    StartLine.write(StartLine.line("relay", host: configuration.host, port: port,
                                   fields: ["db=\(StoreLocation(configuration.databasePath).display)", "attest=\(attest)"],
                                   tlsCertificate: configuration.tlsCertificatePath, acme: configuration.acme, adminPort: relay.adminPort))
    // SIGUSR2 flips RELAY_LOG (the reference's signal: Node reserves SIGUSR1 for its inspector).
    serveUntilSignalled(relay, adminHost: configuration.adminHost, group: group, settings: RelayConfiguration.settingsTable, arguments: arguments,
                        inPlace: configuration.inPlace) { values throws(SettingError) in try RelayConfiguration.build(values).0.inPlace }
default:
    FileHandle.standardError.write(Data(usage.utf8))
    fail("unknown command \(command)")
}
