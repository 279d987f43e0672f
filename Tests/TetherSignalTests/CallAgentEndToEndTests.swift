import Foundation
import TetherCall
import TetherNet
import TetherRTC
import TetherSync
import TetherTestSupport
import TetherWire
import XCTest

/// Two (and three) SDK clients call each other through a real `tether signal` process, each a
/// `CallAgent` (signaling client + call machine) over the in-memory media transport: offer,
/// answer, candidates, channel, the KK handshake and key confirmation, chat both ways, rotation
/// under traffic, hang-up; a third caller gets `busy`; tampered signals and frames are dropped
/// or fail closed as signaling.md §7.2 and §9.6 say.
final class CallAgentEndToEndTests: XCTestCase {
    var group: EventLoopGroup!
    var server: ServiceProcess!
    let network = InMemoryMediaNetwork()
    /// Every transport the agents made, by call and identity, so a test can tamper with one.
    let transports = TransportLog()

    override func setUpWithError() throws {
        group = try EventLoopGroup(count: 2)
        server = try ServiceProcess(TetherBinary.url, ["signal", "--local", "--signal-port", "0"],
                                    expecting: "signal: listening on")
    }

    override func tearDown() {
        server.stop()
        group.shutdown()
    }

    var endpoint: SignalingEndpoint { try! SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true) }

    func agent(_ identity: CallIdentity = CallIdentity()) throws -> (CallAgent, WaitableLog<CallAgent.Event>) {
        let events = WaitableLog<CallAgent.Event>()
        let network = self.network, transports = self.transports, id = identity.id
        let agent = try CallAgent(identity: identity, endpoint: endpoint, loop: group.next(), media: { call, _ in
            let transport = network.makeTransport()
            transports.record(transport, call: call, id: id)
            return transport
        }) { events.append($0) }
        agent.start()
        XCTAssertNotNil(events.first(within: 10) { if case .online = $0 { true } else { nil } }, "registered")
        return (agent, events)
    }

    /// Alice rings Bob, Bob accepts; both sides secured.
    func connect(_ alice: (CallAgent, WaitableLog<CallAgent.Event>), _ bob: (CallAgent, WaitableLog<CallAgent.Event>),
                 file: StaticString = #filePath, line: UInt = #line) throws -> CallUUID {
        let call = alice.0.dial(bob.0.identity.id)
        let invitation = try XCTUnwrap(bob.1.first(within: 10) { if case let .call(.incoming(from, id)) = $0 { (from, id) } else { nil } },
                                       file: file, line: line)
        XCTAssertEqual(invitation.0, alice.0.identity.id, "the invitation names the caller", file: file, line: line)
        XCTAssertEqual(invitation.1, call, file: file, line: line)
        bob.0.accept(call)
        for side in [alice, bob] {
            let number = try XCTUnwrap(side.1.first(within: 20) { if case let .call(.secured(_, number)) = $0 { number } else { nil } },
                                       file: file, line: line)
            XCTAssertEqual(number, SafetyNumber.of(alice.0.identity.id, bob.0.identity.id), file: file, line: line)
        }
        return call
    }

    func texts(_ events: WaitableLog<CallAgent.Event>, atLeast count: Int) -> [String] {
        events.values(within: 15, atLeast: count) { if case let .call(.message(_, .text(_, text, _))) = $0 { text } else { nil } }
    }

    func ended(_ events: WaitableLog<CallAgent.Event>) -> CallEndReason? {
        events.first(within: 15) { if case let .call(.ended(_, reason)) = $0 { reason } else { nil } }
    }

    func testTwoClientsCallChatBothWaysRotateUnderTrafficAndHangUp() throws {
        let alice = try agent(CallIdentity()), bob = try agent(CallIdentity())
        defer { alice.0.stop(); bob.0.stop() }
        let call = try connect(alice, bob)

        let hello = alice.0.send("hello Bob", on: call)
        XCTAssertEqual(texts(bob.1, atLeast: 1), ["hello Bob"])
        XCTAssertNotNil(alice.1.first(within: 10) { if case .call(.message(_, .receipt(hello))) = $0 { true } else { nil } }, "Bob's receipt")
        bob.0.send("hi Alice", on: call)
        XCTAssertEqual(texts(alice.1, atLeast: 1), ["hi Alice"])

        // Rotation while both sides keep talking: nothing is lost or reordered across the switch.
        alice.0.rotate(call)
        let burst = (1...20).map { "a\($0)" }, answers = (1...20).map { "b\($0)" }
        for (a, b) in zip(burst, answers) {
            alice.0.send(a, on: call)
            bob.0.send(b, on: call)
        }
        XCTAssertEqual(texts(bob.1, atLeast: 21), ["hello Bob"] + burst)
        XCTAssertEqual(texts(alice.1, atLeast: 21), ["hi Alice"] + answers)
        for side in [alice, bob] {
            XCTAssertNotNil(side.1.first(within: 10) { if case .call(.rotated(_, 1)) = $0 { true } else { nil } }, "epoch 1 on both sides")
        }

        alice.0.hangUp(call)
        XCTAssertEqual(ended(alice.1), .hungUp)
        XCTAssertEqual(ended(bob.1), .peerHungUp)
        let idle = try awaitValue { await bob.0.currentCall() }
        XCTAssertNil(idle)
    }

    func testTextsQueuedFasterThanTheChannelSendsArriveInOrderAndAHangUpWaitsForTheirReceipts() throws {
        let alice = try agent(CallIdentity()), bob = try agent(CallIdentity())
        defer { alice.0.stop(); bob.0.stop() }
        let call = try connect(alice, bob)
        // More than the machine's queue and the channel's window together: `queue` holds the
        // writer back instead of refusing, as `tether call` reads its input.
        let lines = (1...200).map { "paste \($0)" }
        let typed = expectation(description: "every line queued, then the hang-up")
        let ids = Locked<[MessageID]>([])
        Task {
            for line in lines {
                do throws(CallSendError) {
                    let id = try await alice.0.queue(line, on: call)
                    ids.withLock { $0.append(id) }
                } catch {
                    XCTFail("\(line): \(error)")
                }
            }
            alice.0.hangUp(call)
            typed.fulfill()
        }
        wait(for: [typed], timeout: 30)
        XCTAssertEqual(ended(alice.1), .hungUp)
        XCTAssertEqual(texts(bob.1, atLeast: lines.count), lines, "all of them, in order")
        let receipts = alice.1.values(within: 5, atLeast: lines.count) { if case let .call(.message(_, .receipt(id))) = $0 { id } else { nil } }
        XCTAssertEqual(receipts, ids.withLock { $0 }, "each receipted before the close")
        XCTAssertNil(alice.1.first(within: 0.2) { if case .call(.undelivered) = $0 { true } else { nil } }, "nothing lost")
        XCTAssertEqual(ended(bob.1), .peerHungUp)
    }

    func testAThirdCallerGetsBusyAndTheCallGoesOn() throws {
        let alice = try agent(), bob = try agent(), carol = try agent()
        defer { alice.0.stop(); bob.0.stop(); carol.0.stop() }
        let call = try connect(alice, bob)
        carol.0.dial(bob.0.identity.id)
        XCTAssertEqual(ended(carol.1), .peerBusy)
        XCTAssertFalse(bob.1.all.contains { if case .call(.incoming(from: carol.0.identity.id, _)) = $0 { true } else { false } })
        alice.0.send("still here", on: call)
        XCTAssertEqual(texts(bob.1, atLeast: 1), ["still here"])
    }

    func testACallToAnIDThatIsNotOnlineEndsAtOnce() throws {
        let alice = try agent()
        defer { alice.0.stop() }
        let started = Date()
        alice.0.dial(CallIdentity().id)
        XCTAssertEqual(ended(alice.1), .peerOffline)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "not after the 45 s ringing timeout")
    }

    func testATamperedFrameFailsTheChannelClosedOnBothSides() throws {
        let alice = try agent(), bob = try agent()
        defer { alice.0.stop(); bob.0.stop() }
        let call = try connect(alice, bob)
        try XCTUnwrap(transports.transport(call: call, id: bob.0.identity.id)).tamperNextMessage()
        bob.0.send("this one is flipped on the way", on: call)
        XCTAssertEqual(ended(alice.1), .channelFailed(.authenticationFailure))
        XCTAssertEqual(ended(bob.1), .peerFailed, "Alice's close error reaches Bob")
        XCTAssertFalse(alice.1.all.contains { if case .call(.message) = $0 { true } else { false } }, "nothing of the tampered frame was delivered")
    }

    func testSignalsForgedOrSentByAnotherIdentityChangeNothing() throws {
        let alice = try agent(), bob = try agent()
        defer { alice.0.stop(); bob.0.stop() }
        let call = try connect(alice, bob)
        let mallory = CallIdentity()
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: endpoint, identity: mallory, loop: group.next()) { events.append($0) }
        client.start()
        defer { client.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        let dropsBefore = try awaitValue { await bob.0.inspect { $0.droppedSignals.values.reduce(0, +) } }

        // Mallory's own, validly signed `close` for the call: not from Bob's peer, so dropped.
        client.send(mallory.signal(.close, to: bob.0.identity.id, call: call, body: CallSignalBody.close(.hangup).base64))
        // A `close` claiming to be Alice's, with Mallory's signature: the server refuses it.
        let honest = alice.0.identity.signal(.close, to: bob.0.identity.id, call: call, body: CallSignalBody.close(.hangup).base64)
        var forged = honest.signature
        forged[0] ^= 1
        client.send(SignalMessage(kind: .close, from: mallory.id, to: bob.0.identity.id, call: call, body: honest.body, signature: forged))
        let refusal = try XCTUnwrap(events.first(within: 10) { if case let .signalRefused(r) = $0 { r } else { nil } })
        XCTAssertEqual(refusal.knownCode, .badSignature)

        var dropped = dropsBefore
        _ = try Eventually.holds(within: 5, every: 0.05) {
            dropped = try awaitValue { await bob.0.inspect { $0.droppedSignals.values.reduce(0, +) } }
            return dropped != dropsBefore
        }
        XCTAssertEqual(dropped, dropsBefore + 1, "Mallory's close was dropped by Bob's machine")
        alice.0.send("the call is intact", on: call)
        XCTAssertEqual(texts(bob.1, atLeast: 1), ["the call is intact"])
        XCTAssertNil(bob.1.all.lazy.compactMap { if case let .call(.ended(_, reason)) = $0 { reason } else { nil } }.first)
    }

    /// The agent's one timer follows the machine's next deadline: on a manual clock, 45 s
    /// without an answer end the ringing call, and the callee hears `close` `timeout`.
    func testAnUnansweredCallTimesOutAtItsDeadlineAndTheCalleeHearsIt() throws {
        let clock = ManualClock()
        let manual = try EventLoopGroup(count: 1, clock: clock)
        defer { manual.shutdown() }
        let events = WaitableLog<CallAgent.Event>()
        let network = self.network
        let alice = try CallAgent(identity: CallIdentity(), endpoint: endpoint, loop: manual.next(), media: { _, _ in network.makeTransport() }) {
            events.append($0)
        }
        alice.start()
        defer { alice.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .online = $0 { true } else { nil } })
        let bob = try agent()
        defer { bob.0.stop() }
        alice.dial(bob.0.identity.id)
        XCTAssertNotNil(bob.1.first(within: 10) { if case .call(.incoming) = $0 { true } else { nil } })
        clock.advance(by: .seconds(44))
        try manual.loops[0].submitAndWait { manual.loops[0].runTimers() }
        XCTAssertFalse(events.all.contains { if case .call(.ended) = $0 { true } else { false } }, "still ringing at 44 s")
        clock.advance(by: .seconds(1))
        try manual.loops[0].submitAndWait { manual.loops[0].runTimers() }
        XCTAssertEqual(ended(events), .timeout(.ringing))
        XCTAssertEqual(ended(bob.1), .peerTimedOut)
    }

    /// The same call over the real WebRTC data channel (TetherRTC: libnice ICE on loopback,
    /// DTLS 1.2, usrsctp and DCEP) instead of the in-memory transport.
    func testTwoClientsCallOverTheWebRTCDataChannelAndChat() throws {
        func rtcAgent() throws -> (CallAgent, WaitableLog<CallAgent.Event>) {
            let events = WaitableLog<CallAgent.Event>()
            let agent = try CallAgent(identity: CallIdentity(), endpoint: endpoint, loop: group.next(), media: { _, servers in
                RTCMediaTransport(iceServers: servers, options: .init(localAddresses: ["127.0.0.1"]))
            }) { events.append($0) }
            agent.start()
            XCTAssertNotNil(events.first(within: 10) { if case .online = $0 { true } else { nil } }, "registered")
            return (agent, events)
        }
        let alice = try rtcAgent(), bob = try rtcAgent()
        defer { alice.0.stop(); bob.0.stop() }
        let started = Date()
        let call = try connect(alice, bob)
        let setup = Date().timeIntervalSince(started)
        alice.0.send("hello over WebRTC", on: call)
        XCTAssertEqual(texts(bob.1, atLeast: 1), ["hello over WebRTC"])
        bob.0.send(String(repeating: "b", count: 4000), on: call)
        XCTAssertEqual(texts(alice.1, atLeast: 1), [String(repeating: "b", count: 4000)])
        alice.0.hangUp(call)
        XCTAssertEqual(ended(alice.1), .hungUp)
        XCTAssertEqual(ended(bob.1), .peerHungUp)
        print("webrtc call setup (dial to both secured) on loopback: \(Int(setup * 1000)) ms")
    }

    /// §7.5's relay-only policy through a real coturn whose REST credentials a real `tether
    /// signal` issued: the call connects and both ends' selected pair is relayed.
    func testARelayOnlyCallRunsThroughCoturnWithTheCredentialsTheServerIssued() throws {
        let secret = "tether-relay-" + UUID().uuidString
        let coturn = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("coturn_fixture.py"), "serve", "--secret", secret],
                                        expecting: "listening on")
        let turn = "turn:127.0.0.1:\(coturn.port)?transport=udp"
        let signal = try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", "0"],
                                        environment: ["TURN_MODE": "coturn", "TURN_SECRET": secret, "TURN_URLS": turn], expecting: "signal: listening on")
        defer { signal.stop(); coturn.stop() }
        let relayEndpoint = try SignalingEndpoint("ws://127.0.0.1:\(signal.port)/signal", allowLoopbackWS: true)
        let made = MediaLog()
        func relayAgent() throws -> (CallAgent, WaitableLog<CallAgent.Event>) {
            let events = WaitableLog<CallAgent.Event>()
            let agent = try CallAgent(identity: CallIdentity(), endpoint: relayEndpoint, loop: group.next(), media: { _, servers in
                let transport = RTCMediaTransport(iceServers: servers, options: .init(relayOnly: true, localAddresses: ["127.0.0.1"]))
                made.append(transport)
                return transport
            }) { events.append($0) }
            agent.start()
            let registration = try XCTUnwrap(events.first(within: 10) { if case let .online(r) = $0 { r } else { nil } })
            XCTAssertEqual(registration.iceServers.flatMap(\.urls), [turn])
            XCTAssertNotNil(registration.iceServers.first?.credential, "TURN REST credentials issued")
            return (agent, events)
        }
        let alice = try relayAgent(), bob = try relayAgent()
        defer { alice.0.stop(); bob.0.stop() }
        let call = try connect(alice, bob)
        alice.0.send("through the relay", on: call)
        XCTAssertEqual(texts(bob.1, atLeast: 1), ["through the relay"])
        let transports = made.all
        XCTAssertEqual(transports.count, 2)
        for transport in transports {
            let pair = try XCTUnwrap(transport.selectedPair())
            XCTAssertEqual(pair.local.type, .relay, "\(pair)")
            XCTAssertEqual(pair.remote.type, .relay, "\(pair)")
        }
        alice.0.hangUp(call)
        XCTAssertEqual(ended(bob.1), .peerHungUp)
    }

    /// A peer whose media sends a malformed candidate: the callee's WebRTC transport refuses
    /// it, the call ends with `close` `error` on both sides, and both agents stay registered and
    /// can call again.
    func testAMalformedCandidateEndsTheCallAndTheNextCallWorks() throws {
        let firstCall = WaitableLog<Bool>()
        func rtcAgent(garbling: Bool) throws -> (CallAgent, WaitableLog<CallAgent.Event>) {
            let events = WaitableLog<CallAgent.Event>()
            let agent = try CallAgent(identity: CallIdentity(), endpoint: endpoint, loop: group.next(), media: { _, servers in
                let real = RTCMediaTransport(iceServers: servers, options: .init(localAddresses: ["127.0.0.1"]))
                guard garbling, firstCall.all.isEmpty else { return real }
                firstCall.append(true)
                return GarblingTransport(real)
            }) { events.append($0) }
            agent.start()
            XCTAssertNotNil(events.first(within: 10) { if case .online = $0 { true } else { nil } })
            return (agent, events)
        }
        let alice = try rtcAgent(garbling: true), bob = try rtcAgent(garbling: false)
        defer { alice.0.stop(); bob.0.stop() }
        let call = alice.0.dial(bob.0.identity.id)
        XCTAssertNotNil(bob.1.first(within: 10) { if case .call(.incoming) = $0 { true } else { nil } })
        bob.0.accept(call)
        XCTAssertEqual(ended(bob.1), .mediaFailed, "Bob's transport refused the candidate")
        XCTAssertEqual(ended(alice.1), .peerFailed, "and told Alice with close error")
        // Both still serve: Bob calls Alice back (Alice's transport garbles only its first call).
        let again = bob.0.dial(alice.0.identity.id)
        XCTAssertNotNil(alice.1.first(within: 10) { if case let .call(.incoming(_, id)) = $0, id == again { true } else { nil } })
        alice.0.accept(again)
        XCTAssertNotNil(bob.1.first(within: 20) { if case let .call(.secured(id, _)) = $0, id == again { true } else { nil } }, "the next call is secured")
    }

    /// Runs an async read from a synchronous test.
    func awaitValue<T: Sendable>(_ body: @escaping @Sendable () async -> T) throws -> T {
        let box = WaitableLog<T>()
        Task { box.append(await body()) }
        return try XCTUnwrap(box.first(within: 10) { $0 })
    }
}

/// The media transports the agents made, for tests that reach into one.
final class TransportLog: @unchecked Sendable {  // `lock` guards `made`
    private let lock = NSLock()
    private var made: [String: InMemoryMediaTransport] = [:]

    func record(_ transport: InMemoryMediaTransport, call: CallUUID, id: SignalingID) {
        lock.withLock { made[call.text + id.canonical] = transport }
    }

    func transport(call: CallUUID, id: SignalingID) -> InMemoryMediaTransport? { lock.withLock { made[call.text + id.canonical] } }
}

/// The WebRTC transports the agents made.
final class MediaLog: @unchecked Sendable {  // `lock` guards `made`
    private let lock = NSLock()
    private var made: [RTCMediaTransport] = []

    func append(_ transport: RTCMediaTransport) { lock.withLock { made.append(transport) } }
    var all: [RTCMediaTransport] { lock.withLock { made } }
}

/// A media transport that reports one malformed local candidate before the real ones, as a
/// buggy or hostile peer would send it.
final class GarblingTransport: CallMediaTransport, CallMediaTransportDelegate, @unchecked Sendable {  // `lock` guards `sent`
    private let real: RTCMediaTransport
    private let lock = NSLock()
    private var sent = false
    weak var delegate: (any CallMediaTransportDelegate)?

    init(_ real: RTCMediaTransport) {
        self.real = real
        real.delegate = self
    }

    func perform(_ command: CallMediaCommand) { real.perform(command) }

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        if case let .localCandidate(candidate) = event, !candidate.isEndOfCandidates, lock.withLock({ !sent }) {
            lock.withLock { sent = true }
            delegate?.mediaTransport(self, didReport: .localCandidate(CallCandidate(candidate: "candidate:1 1 UDP 99999999999 127.0.0.1 70000 typ host",
                                                                                   sdpMid: candidate.sdpMid, sdpMLineIndex: candidate.sdpMLineIndex)))
        }
        delegate?.mediaTransport(self, didReport: event)
    }
}
