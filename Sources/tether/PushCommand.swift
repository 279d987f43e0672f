import Foundation
import Glibc
import TetherNet
import TetherPush
import TetherService
import TetherStore

/// `tether push`: runs the push relay (push.md). `tether push send …` is the operator's end-to-end
/// check of a running one (PushSendCommand.swift). Synchronous, on the main thread, for the
/// reason `runSignalCommand` gives.
func runPushCommand(_ arguments: [String]) {
    answerHelpFlags(arguments, help: PushConfiguration.helpText + "\n\ntether push send --help: send a test notification through a running push relay.",
                    markdown: PushConfiguration.markdownReference)
    answerCheckFlag("push", arguments, table: PushConfiguration.settingsTable) { values throws(SettingError) in try PushConfiguration.build(values).1 }
    let environment = ProcessInfo.processInfo.environment
    let configuration = loadSettings("push", style: { ($0.logFormat, $0.logLevel) }) { () throws(SettingError) in try PushConfiguration.load(environment: environment, arguments: arguments) }
    let store: any PushStore = openWaitingForDatabase("push", setting: "PUSH_DB") { try StoreLocation(configuration.databasePath).openPushStore() }
    SignalWatcher.blockHandledSignals()
    let group: EventLoopGroup
    let push: PushServer
    let port: UInt16
    do {
        var client = CurlHTTP2Client.Configuration()
        client.extraRootsPath = configuration.caFile
        let transport = try CurlHTTP2Client(configuration: client)
        group = try EventLoopGroup()
        push = try PushServer(configuration: configuration, group: group, store: store, transport: transport)
        port = try push.start()
    } catch {
        fail("push: cannot start: \(error)", code: 1)
    }
    StartLine.write(StartLine.line("push", host: configuration.host, port: port,
                                   fields: ["profiles=\(configuration.profiles)", "db=\(StoreLocation(configuration.databasePath).display)"],
                                   tlsCertificate: configuration.tlsCertificatePath, acme: configuration.acme, adminPort: push.adminPort))
    serveUntilSignalled(push, adminHost: configuration.adminHost, group: group, settings: PushConfiguration.settingsTable, arguments: arguments,
                        inPlace: configuration.inPlace) { values throws(SettingError) in try PushConfiguration.build(values).0.inPlace }
}
