import Foundation
import TetherCall
import TetherCrypto
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// The SDK's `SignalingClient` against the real `tether signal` binary: registration, signals
/// forwarded unchanged, refusals, presence, a duplicate ID, and reconnecting after a restart.
final class SignalingClientEndToEndTests: XCTestCase {
    var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    func server(port: UInt16 = RelayProcess.freePort(), _ environment: [String: String] = [:]) throws -> ServiceProcess {
        try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", String(port)], environment: environment, expecting: "signal: listening on")
    }

    func client(_ server: ServiceProcess, _ identity: CallIdentity = CallIdentity(), reconnects: Bool = true) throws -> (SignalingClient, ClientEvents) {
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true), identity: identity, loop: group.next(),
                                         reconnects: reconnects) { events.append($0) }
        client.start()
        return (client, events)
    }

    func testARegistrationDeliversTheICEServersAndTheirExpiry() throws {
        let server = try self.server(["STUN_URLS": "stun:127.0.0.1:3478"])
        let (client, events) = try client(server)
        defer { client.stop() }
        let registration = try XCTUnwrap(events.first(within: 10) { if case let .registered(r) = $0 { r } else { nil } }, "\(events.all)")
        XCTAssertEqual(registration.id, client.identity.id)
        XCTAssertEqual(registration.iceServers, [ICEServer(urls: ["stun:127.0.0.1:3478"])])
        XCTAssertEqual(Double(registration.iceExpiresAt), Date().timeIntervalSince1970 + 3600, accuracy: 30)
    }

    func testASignalArrivesUnchangedAndAnOfflineRecipientIsRefusedWithItsCallAndKind() throws {
        let server = try self.server()
        let (alice, aliceEvents) = try client(server)
        let (bob, bobEvents) = try client(server)
        defer { alice.stop(); bob.stop() }
        for events in [aliceEvents, bobEvents] { XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } }) }

        let call = CallUUID.random()
        let sent = alice.identity.signal(.channel, to: bob.identity.id, call: call, body: "e30=")
        alice.send(sent)
        let received = try XCTUnwrap(bobEvents.first(within: 10) { if case let .signal(s) = $0 { s } else { nil } })
        XCTAssertEqual(received, sent)
        XCTAssertTrue(IdentityVerification.isAuthentic(received))

        let nobody = CallIdentity().id
        alice.send(alice.identity.signal(.offer, to: nobody, call: call, body: "e30="))
        let refusal = try XCTUnwrap(aliceEvents.first(within: 10) { if case let .signalRefused(r) = $0 { r } else { nil } })
        XCTAssertEqual(refusal.knownCode, .offline)
        XCTAssertEqual(refusal.call, call)
        XCTAssertEqual(refusal.kind, .offer)
    }

    func testPresenceAnswersForEveryIDAskedAndFollowsADisconnect() async throws {
        let server = try self.server()
        let (alice, aliceEvents) = try client(server)
        let (bob, bobEvents) = try client(server)
        defer { alice.stop() }
        for events in [aliceEvents, bobEvents] { XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } }) }
        let nobody = CallIdentity().id
        let online = try await alice.presence([bob.identity.id, nobody]).get()
        XCTAssertEqual(online, [bob.identity.id: true, nobody: false])

        bob.stop()
        XCTAssertNotNil(bobEvents.first(within: 10) { if case .disconnected(_, retryIn: nil) = $0 { true } else { nil } })
        var gone = false
        for _ in 0..<50 where !gone {
            gone = try await alice.presence([bob.identity.id]).get() == [bob.identity.id: false]
            if !gone { try await Task.sleep(nanoseconds: 200_000_000) }
        }
        XCTAssertTrue(gone, "presence is removed once the socket closed")
        let refused = await bob.presence([nobody])
        XCTAssertEqual(refused, .failure(.notRegistered))
    }

    func testASecondConnectionWithALiveIDIsRefusedAndTheFirstKeepsItsRegistration() throws {
        let server = try self.server()
        let identity = CallIdentity()
        let (first, firstEvents) = try client(server, identity)
        defer { first.stop() }
        XCTAssertNotNil(firstEvents.first(within: 10) { if case .registered = $0 { true } else { nil } })

        let (second, secondEvents) = try client(server, identity, reconnects: false)
        let failure = try XCTUnwrap(secondEvents.first(within: 10) { if case let .disconnected(f, retryIn: nil) = $0 { f } else { nil } })
        XCTAssertEqual(failure.code, .duplicateID)
        XCTAssertFalse(failure.isFinal, "a duplicate clears once the other socket is gone, so a reconnecting client tries again")
        XCTAssertEqual(failure.description, "signaling: this ID is already connected from another device or session")
        XCTAssertNil(second.registration)
        XCTAssertFalse(firstEvents.all.contains { if case .disconnected = $0 { true } else { false } })
    }

    func testAClientRegistersAgainAfterTheServerRestarts() throws {
        let port = RelayProcess.freePort()
        var server: ServiceProcess? = try self.server(port: port)
        let (client, events) = try client(server!)
        defer { client.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        server?.stop()
        let retry = try XCTUnwrap(events.first(within: 10) { if case let .disconnected(f, retryIn: delay?) = $0 { (f, delay) } else { nil } })
        XCTAssertEqual(retry.0.closeCode, 1001, "SIGTERM closes every socket 1001 shutting_down")
        XCTAssertLessThanOrEqual(retry.1, 3, "the first retry comes within 3 s")
        server = try self.server(port: port)
        XCTAssertEqual(events.values(within: 15, atLeast: 2) { if case let .registered(r) = $0 { r } else { nil } }.count, 2)
        withExtendedLifetime(server) {}
    }

    func testAnUnreachableServerIsReportedWithoutRetryingWhenReconnectsAreOff() throws {
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(RelayProcess.freePort())/signal", allowLoopbackWS: true), identity: CallIdentity(), loop: group.next(),
                                         reconnects: false) { events.append($0) }
        client.start()
        let failure = try XCTUnwrap(events.first(within: 10) { if case let .disconnected(f, retryIn: nil) = $0 { f } else { nil } })
        XCTAssertTrue(failure.description.hasPrefix("signaling: cannot reach the server"), failure.description)
    }
}

extension SignalingClientEndToEndTests {
    /// §4: the client pings every 15 s and drops a server that did not answer the previous ping,
    /// then reconnects; a stopped (SIGSTOP) server plays the dead path, a manual clock the time.
    func testAServerThatStopsAnsweringPingsIsDroppedAfterTheNextPingAndRetried() async throws {
        let server = try self.server()
        let pid = server.process.processIdentifier
        defer { ProcessStop.resume(pid) }
        let clock = ManualClock()
        let manual = try EventLoopGroup(count: 1, clock: clock)
        defer { manual.shutdown() }
        let loop = manual.loops[0]
        let events = ClientEvents()
        let client = try SignalingClient(endpoint: try SignalingEndpoint("ws://127.0.0.1:\(server.port)/signal", allowLoopbackWS: true),
                                         identity: CallIdentity(), loop: loop) { events.append($0) }
        client.start()
        defer { client.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        func advance(_ seconds: UInt64) async {
            clock.advance(by: .seconds(seconds))
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in loop.execute { loop.runTimers(); done.resume() } }
        }
        await advance(15)   // a ping, answered
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertTrue(ProcessStop.stop(pid), "the server stopped")
        await advance(15)   // the answer came: a new ping, never answered
        XCTAssertFalse(events.all.contains { if case .disconnected = $0 { true } else { false } }, "an answered ping keeps the socket")
        await advance(15)
        let retry = events.first(within: 5) { if case let .disconnected(_, retryIn: delay?) = $0 { delay } else { nil } }
        XCTAssertNotNil(retry, "dropped after the unanswered ping, and tried again")
    }

    /// `tether presence`, as a script runs it: one line per contact in the order given.
    func testTetherPresencePrintsEachContactOnlineOrOfflineInTheOrderGiven() throws {
        let server = try self.server()
        let (alice, events) = try client(server)
        defer { alice.stop() }
        XCTAssertNotNil(events.first(within: 10) { if case .registered = $0 { true } else { nil } })
        let nobody = CallIdentity().id
        let url = "ws://127.0.0.1:\(server.port)/signal"
        let link = ContactLink(id: alice.identity.id, relay: try SignalingEndpoint(url, allowLoopbackWS: true)).url
        let (status, output) = try TetherBinary.run(["presence", nobody.display, link, "--signal", url])
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(output, "\(nobody.canonical) offline\n\(alice.identity.id.canonical) online\n")

        let (refused, why) = try TetherBinary.run(["presence", nobody.canonical, "--signal", "ws://127.0.0.1:\(RelayProcess.freePort())/signal"])
        XCTAssertEqual(refused, 1)
        XCTAssertTrue(why.hasPrefix("tether: presence: signaling: cannot reach the server"), why)
        let (usage, notAKey) = try TetherBinary.run(["presence", "1234", "--signal", url])
        XCTAssertEqual(usage, 2)
        XCTAssertEqual(notAKey.split(separator: "\n").count, 1, notAKey)
    }
}

typealias ClientEvents = WaitableLog<SignalingClient.Event>
