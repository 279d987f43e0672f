// A headless bot that answers every call and sends each text back, written as an app developer
// writes it with the calls SDK: an identity kept in a state directory, a `CallAgent` on one
// event loop, and the WebRTC data channel of `TetherRTC` as each call's media.
//
//   example-echo-bot --signal ws://127.0.0.1:8791/signal [--state DIR] [--once]
//
// Standard output: `online <ID>` once registered (the 64 hex digits a caller dials), then one
// line per call event. `--once` exits after the first call ends: 0 if it was secured.
import Dispatch
import Foundation
import Synchronization
import TetherCall
import TetherDevice
import TetherNet
import TetherRTC
import TetherWire

@main
struct EchoBot {
    static func main() async throws {
        let options = Options(CommandLine.arguments.dropFirst())
        // Made on the first run and kept: its public key is the ID callers dial.
        let identity: CallIdentity
        let endpoint: SignalingEndpoint
        do {
            identity = try IdentityStore(directory: try StateDirectory(path: options.statePath)).loadOrCreate().identity
            endpoint = try SignalingEndpoint(options.signalURL, allowLoopbackWS: true)
        } catch {
            fail("\(error)")
        }
        let holder = AgentHolder()
        let reactions = DispatchQueue(label: "echo-bot")
        let group = try EventLoopGroup(count: 1)
        let agent = try CallAgent(identity: identity, endpoint: endpoint, loop: group.next(), media: { _, iceServers in
            RTCMediaTransport(iceServers: iceServers)
        }) { event in
            // The handler runs on the agent's loop, in the middle of the agent's own work: the
            // bot answers from a queue of its own, in order, as an app answers from its UI.
            reactions.async {
                guard let agent = holder.agent.withLock({ $0 }) else { return }
                handle(event, agent: agent, identity: identity, holder: holder, once: options.once)
            }
        }
        holder.agent.withLock { $0 = agent }
        agent.start()
        // Everything happens on the agent's loop; this task only waits.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }

    /// Runs on the bot's queue, one event at a time, in the order the agent reported them.
    static func handle(_ event: CallAgent.Event, agent: CallAgent, identity: CallIdentity, holder: AgentHolder, once: Bool) {
        switch event {
        case .online:
            say("online \(identity.id.canonical)")
        case let .offline(failure, retryIn):
            FileHandle.standardError.write(Data("example-echo-bot: \(failure)\n".utf8))
            if retryIn == nil || failure.isFinal { exit(1) }
        case let .call(.incoming(from: caller, call: call)):
            say("incoming \(caller.canonical)")
            agent.accept(call)
        case let .call(.secured(call: _, safetyNumber: number)):
            holder.secured.store(true, ordering: .relaxed)
            say("secured \(number)")
        case let .call(.message(call: call, .text(id: _, text: text, sentAt: _))):
            say("message \(text)")
            // "bye" ends the call; anything else goes straight back.
            if text == "bye" { agent.hangUp(call) } else { agent.send(text, on: call) }
        case let .call(.ended(call: _, reason)):
            say("ended \(reason)")
            if once {
                // Leave the server, and give the call's last signal a moment to go out first.
                agent.stop()
                Thread.sleep(forTimeInterval: 1)
                exit(holder.secured.load(ordering: .relaxed) ? 0 : 1)
            }
        default:
            break
        }
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("example-echo-bot: \(message)\n".utf8))
        exit(2)
    }
}

/// The agent's own events need the agent (to accept, to send), which exists only once made.
final class AgentHolder: Sendable {
    let agent = Mutex<CallAgent?>(nil)
    /// Whether a call was secured (the exit status of `--once`).
    let secured = Atomic(false)
}

/// The command line: `--signal URL`, `--state DIR`, `--once`.
struct Options {
    var signalURL = ""
    var statePath = FileManager.default.currentDirectoryPath + "/echo-bot-state"
    var once = false

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--once": once = true
            case "--signal", "--state":
                guard let value = rest.popFirst() else { EchoBot.fail("\(flag) needs a value") }
                if flag == "--signal" { signalURL = value } else { statePath = value }
            default: EchoBot.fail("unexpected argument \(flag)")
            }
        }
        if signalURL.isEmpty { EchoBot.fail("--signal URL is required (a tether signal server's wss:// URL, or ws:// on loopback)") }
    }
}
