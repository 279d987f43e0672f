// The computer's side of a companion app, on Linux, written as an app developer writes it with
// the companion SDK: it pairs with a phone through a relay (a link to show, the phone's six-digit
// code to type), reconnects with signed joins on every later run, and once the phone has handed
// over its push registration it sends one sealed wake-up through a `tether push` relay.
//
//   example-computer-side --relay https://relay.example.com --push https://push.example.com [--state DIR]
//
// After pairing, each line typed goes to the phone, and each line the phone sends is printed.
import Dispatch
import Foundation
import TetherClient
import TetherDevice
import TetherNet
import TetherWire

@main
struct ComputerSide {
    static func main() async throws {
        let options = Options(CommandLine.arguments.dropFirst())
        let group = try EventLoopGroup(count: 1)
        let state = try StateDirectory(path: options.statePath)
        let context = EndpointContext(loop: group.next(), state: state) { event in show(event) }
        // The first run pairs on `relay`; later runs find the pairing in the state directory and
        // reconnect to wherever it lives, with joins signed by the room secret.
        let computer = MacEndpoint(context: context, transport: .direct(relayOrigin: options.relay)) { _ in await readLineAsync() }
        let running = Task {
            do throws(CompanionError) {
                try await computer.run()
            } catch {
                fail("\(error)")
            }
        }
        let pushing = Task { try await pushWhenRegistered(computer, state: state, pushRelay: options.pushRelay, loop: group.next()) }

        // Standard input belongs to the code entry until the pairing is stored; then each typed
        // line goes to the phone (held while it is offline).
        while state.pairedRole != .mac {
            try await Task.sleep(for: .milliseconds(200))
        }
        say("type lines for the phone; end of input quits")
        while let line = await readLineAsync() {
            computer.send(Array(line.utf8))
        }
        pushing.cancel()
        running.cancel()
        computer.closeSession()
    }

    /// The phone sends its push registration (`pushStatus`: its APNs token and push secret) on
    /// every connect; once it has come, one sealed wake-up goes to the phone through the relay.
    static func pushWhenRegistered(_ computer: MacEndpoint, state: StateDirectory, pushRelay: String, loop: EventLoop) async throws {
        var status = computer.pushStatus
        while status?.relayCredentials == nil {
            try await Task.sleep(for: .seconds(1))
            status = computer.pushStatus
        }
        guard let token = status?.token, let secret = status?.relaySecret, let roomSecret = try state.roomSecret() else { return }
        // A wake-up carries no content: only a nonce sealed under a key both paired devices
        // derive from the room secret. The phone's extension opens it to prove the wake-up was
        // solicited, then fetches the content over the end-to-end channel.
        let sealedNonce = PushNonce.seal(PushNonce.generate(), roomSecret: roomSecret)
        do throws(PushRelayError) {
            try await PushRelayClient(baseURL: pushRelay, loop: loop).wakeITerm(token: token, secret: secret, sealedNonce: sealedNonce)
            say("pushed a sealed wake-up to the phone")
        } catch {
            say("push failed: \(error)")
        }
    }

    /// Runs on the endpoint's loop, one event at a time.
    static func show(_ event: EndpointEvent) {
        switch event {
        case let .pairingLink(link): say("open this link on the phone (or show it as a QR code):\n\(link.url)")
        case .waitingForPeer: say("waiting for the phone")
        case .enterCode: say("type the six digits the phone shows:")
        case let .wrongCode(attemptsLeft): say("wrong code; \(attemptsLeft) more tries")
        case let .pairingRestarted(reason): say("pairing starts over: \(reason)")
        case .paired: say("paired")
        case .connected: say("connected to the phone")
        case let .message(frame): say("phone: \(String(decoding: frame, as: UTF8.self))")
        case let .disconnected(reason, retryIn): say("disconnected (\(reason)); next attempt in \(retryIn)")
        case .relay, .showCode, .codeWithdrawn: break   // the phone's side of a pairing
        }
    }

    /// One line of standard input, read off the concurrency threads (reading blocks).
    static func readLineAsync() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: readLine()) }
        }
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("example-computer-side: \(message)\n".utf8))
        exit(2)
    }
}

/// The command line: `--relay ORIGIN`, `--push URL`, `--state DIR`.
struct Options {
    var relay = ""
    var pushRelay = ""
    var statePath = FileManager.default.currentDirectoryPath + "/computer-side-state"

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard ["--relay", "--push", "--state"].contains(flag) else { ComputerSide.fail("unexpected argument \(flag)") }
            guard let value = rest.popFirst() else { ComputerSide.fail("\(flag) needs a value") }
            switch flag {
            case "--relay":
                // Exactly the relay's RELAY_ORIGIN: it is bound into every signed join.
                guard let origin = RelayOrigin.canonicalize(value, allowLoopbackHTTP: true) else {
                    ComputerSide.fail("--relay needs the relay's origin (https://HOST, or http:// on a loopback host)")
                }
                relay = origin
            case "--push": pushRelay = value
            default: statePath = value
            }
        }
        if relay.isEmpty { ComputerSide.fail("--relay ORIGIN is required") }
        if pushRelay.isEmpty { ComputerSide.fail("--push URL is required (a tether push relay serving Profile I, PUSH_PROFILES=iterm2)") }
    }
}
