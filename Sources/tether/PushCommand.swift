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
    var arguments = arguments
    answerHelpFlags(arguments, help: PushConfiguration.helpText + "\n\ntether push send --help: send a test notification through a running push relay.",
                    markdown: PushConfiguration.markdownReference)
    let environment = serviceEnvironment(&arguments, command: "push")
    let configuration = loadSettings("push") { () throws(SettingError) in try PushConfiguration.load(environment: environment, arguments: arguments) }
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
    FileHandle.standardOutput.write(Data("push: listening on \(configuration.host):\(port) (profiles=\(configuration.profiles), db=\(StoreLocation(configuration.databasePath).display)) tether \(TetherVersion.current)\n".utf8))
    serveUntilSignalled(push, adminHost: configuration.adminHost, group: group)
}
