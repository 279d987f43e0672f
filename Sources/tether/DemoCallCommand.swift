import Foundation
import Glibc
import TetherCall
import TetherNet
import TetherRTC
import TetherService
import TetherSignal
import TetherWire

/// `tether demo call`: a signaling server on loopback and two callers in this process, calling
/// each other over the real WebRTC data channel, with every step explained. Nothing is kept.
func runDemoCallCommand(_ arguments: [String]) async -> Never {
    if arguments.contains("--help") || arguments.contains("-h") {
        print("""
        usage: tether demo call

        Starts a signaling server on loopback (no TURN) and two callers, Alice and Bob, in this
        process with fresh throwaway identities: Alice calls Bob over a WebRTC data channel
        (ICE, DTLS, SCTP), Bob accepts, both show the same safety number, they chat end to end
        encrypted, rotate their keys and hang up. Each step is explained; nothing is written.

        """, terminator: "")
        exit(0)
    }
    guard arguments.isEmpty else { fail("demo call: takes no arguments (see --help)") }
    signal(SIGPIPE, SIG_IGN)
    let console = Console()
    func say(_ line: String) { console.output(line) }
    do {
        let group = try EventLoopGroup(count: 1)
        var configuration = SignalConfiguration()
        configuration.port = 0
        configuration.local = true
        let server = try SignalServer(configuration: configuration, group: group, log: { _ in })
        let port = try server.start()
        let endpoint = try SignalingEndpoint("ws://127.0.0.1:\(port)/signal", allowLoopbackWS: true)
        say("1. A signaling server listens on \(endpoint.url). It relays signed call set-up and never sees what is said.")
        let alice = DemoCaller(name: "Alice"), bob = DemoCaller(name: "Bob")
        for caller in [alice, bob] {
            caller.agent = try CallAgent(identity: caller.identity, endpoint: endpoint, loop: group.next(), media: { _, servers in
                RTCMediaTransport(iceServers: servers, options: .init(localAddresses: ["127.0.0.1"]))
            }) { caller.events.append($0) }
        }
        say("2. Alice and Bob each have an ID: their whole Ed25519 public key.")
        say("   Alice \(alice.identity.id.display)")
        say("   Bob   \(bob.identity.id.display)")
        say("   Bob's contact link (what he would show Alice as a QR code): \(ContactLink(id: bob.identity.id, relay: endpoint).url)")
        for caller in [alice, bob] {
            caller.agent.start()
            _ = try await caller.events.next("registration") { if case .online = $0 { true } else { nil } }
        }
        say("3. Both registered: each signed the server's challenge with its ID key.")
        let call = alice.agent.dial(bob.identity.id)
        say("4. Alice calls Bob: a signed offer with her agreement key and a WebRTC offer.")
        let caller = try await bob.events.next("invitation") { if case let .call(.incoming(from, _)) = $0 { from } else { nil } }
        say("5. Bob's device shows an invitation from \(caller.display); he accepts (consent is always asked).")
        bob.agent.accept(call)
        let aliceNumber = try await alice.events.next("secure channel") { if case let .call(.secured(_, n)) = $0 { n } else { nil } }
        let bobNumber = try await bob.events.next("secure channel") { if case let .call(.secured(_, n)) = $0 { n } else { nil } }
        say("6. ICE found a path, DTLS and SCTP opened the data channel, and inside it a Noise KK handshake")
        say("   authenticated both agreement keys. Both show the safety number (compare it by voice or in person):")
        say("   Alice \(aliceNumber)")
        say("   Bob   \(bobNumber)\(aliceNumber == bobNumber ? "   (equal)" : "   (DIFFERENT: stop)")")
        alice.agent.send("Hello Bob, can you read this?", on: call)
        let first = try await bob.events.next("message") { if case let .call(.message(_, .text(_, text, _))) = $0 { text } else { nil } }
        say("7. Bob reads: \(first)")
        bob.agent.send("Loud and clear. Nobody in between can.", on: call)
        let reply = try await alice.events.next("message") { if case let .call(.message(_, .text(_, text, _))) = $0 { text } else { nil } }
        say("   Alice reads: \(reply)")
        alice.agent.rotate(call)
        let epoch = try await bob.events.next("rotation") { if case let .call(.rotated(_, e)) = $0 { e } else { nil } }
        say("8. Alice asked for fresh keys: a Noise NN handshake inside the channel; both now use epoch \(epoch).")
        alice.agent.hangUp(call)
        let end = try await bob.events.next("hang-up") { if case let .call(.ended(_, reason)) = $0 { reason } else { nil } }
        say("9. Alice hung up; Bob's device says: \(end). Every key of the call is gone.")
        for caller in [alice, bob] { caller.agent.stop() }
        try? await Task.sleep(nanoseconds: 200_000_000)
        server.shutdown()
        group.shutdown()
        leave(0)
    } catch {
        fail("demo call: \(error)", code: 1)
    }
}

/// One demo caller: an identity made for the demo, its agent and what it heard.
private final class DemoCaller: @unchecked Sendable {  // `agent` is set once before any event
    let name: String
    let identity = CallIdentity()
    let events = EventCursor<CallAgent.Event>()
    var agent: CallAgent!

    init(name: String) { self.name = name }
}
