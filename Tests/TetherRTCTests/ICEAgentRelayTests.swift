import Foundation
import TetherCrypto
import TetherRTC
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// ICE through a real coturn on loopback (signaling.md §7.5 relay-only, §8.2 credentials).
final class ICEAgentRelayTests: XCTestCase {
    func relayOnlyPair(transport: String) throws -> (CoturnFixture, ICEPair) {
        let coturn = try CoturnFixture()
        let pair = try ICEPair(servers: [coturn.turnServer(transport: transport)], relayOnly: true)
        return (coturn, pair)
    }

    func assertRelayedEndToEnd(_ pair: ICEPair, file: StaticString = #filePath, line: UInt = #line) throws {
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected(30), "controlling: \(pair.controllingLog.states), controlled: \(pair.controlledLog.states)", file: file, line: line)
        for log in [pair.controllingLog, pair.controlledLog] {
            XCTAssertTrue(log.waitForGathering(), file: file, line: line)
            XCTAssertFalse(log.localCandidates.isEmpty, file: file, line: line)
            for value in log.localCandidates {
                let candidate = try ICECandidate.parse(value)
                XCTAssertEqual(candidate.type, .relay, "relay-only offers relayed candidates only: \(value)", file: file, line: line)
                XCTAssertEqual(candidate.relatedAddress, "0.0.0.0", "the mapped address is withheld: \(value)", file: file, line: line)
                XCTAssertEqual(candidate.relatedPort, 0, value, file: file, line: line)
            }
            let selected = try XCTUnwrap(log.selectedPair, file: file, line: line)
            XCTAssertEqual(selected.local.type, .relay, "\(selected)", file: file, line: line)
            XCTAssertEqual(selected.remote.type, .relay, "\(selected)", file: file, line: line)
        }
        try pair.exchange(self, file: file, line: line)
        XCTAssertTrue(pair.forwardingErrors.isEmpty, "\(pair.forwardingErrors)", file: file, line: line)
    }

    func testRelayOnlyAgentsConnectThroughCoturnOverUDPAndBothSelectedPairsAreRelayed() throws {
        let (coturn, pair) = try relayOnlyPair(transport: "udp")
        defer { pair.close(); coturn.stop() }
        try assertRelayedEndToEnd(pair)
    }

    func testRelayOnlyAgentsConnectThroughCoturnOverTCPAndBothSelectedPairsAreRelayed() throws {
        let (coturn, pair) = try relayOnlyPair(transport: "tcp")
        defer { pair.close(); coturn.stop() }
        try assertRelayedEndToEnd(pair)
    }

    /// The agent gathers on 127.0.0.2 while coturn listens on 127.0.0.1, so the device's
    /// address (and the mapped address coturn reports, the same on loopback) can be told from
    /// the TURN server's: libnice names it as each relayed candidate's related address, and
    /// nothing the agent trickles may.
    func testRelayOnlyCandidatesNameTheTURNServerOnlyNeverTheDeviceAddressOrPort() throws {
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, servers: [coturn.turnServer()], relayOnly: true,
                                                  localAddresses: ["127.0.0.2"]), handler: log.record)
        defer { agent.close() }
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering(), "\(log.all)")
        XCTAssertNil(log.failure)
        XCTAssertFalse(log.localCandidates.isEmpty)
        for value in log.localCandidates {
            let candidate = try ICECandidate.parse(value)
            XCTAssertEqual(candidate.type, .relay, value)
            XCTAssertEqual(candidate.connectionAddress, "127.0.0.1", "coturn's relayed address: \(value)")
            XCTAssertEqual(candidate.relatedAddress, "0.0.0.0", value)
            XCTAssertEqual(candidate.relatedPort, 0, value)
            XCTAssertFalse(value.contains("127.0.0.2"), value)
        }
    }

    func testAWrongTURNPasswordGathersNoRelayCandidateAndFailsTheRelayOnlyAgent() throws {
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        let log = ICEEventLog()
        let wrong = Base64.encode(SecureRandom.bytes(20))
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, servers: [coturn.turnServer(password: wrong)], relayOnly: true,
                                                  localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        try agent.startGathering()
        XCTAssertTrue(log.waitForFailure(20), "\(log.all)")
        XCTAssertTrue(log.gatheringComplete)
        XCTAssertEqual(log.localCandidates, [], "no candidate at all is offered")
        XCTAssertEqual(log.failure, .noRelayCandidate)
        guard case .failed(.noRelayCandidate)? = log.states.last else { return XCTFail("failed is final: \(log.states)") }
    }

    func testAnAgentWithTURNAndHostCandidatesGathersBothAndPrefersTheDirectPath() throws {
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        let pair = try ICEPair(servers: [coturn.turnServer()])
        defer { pair.close() }
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected(30), "\(pair.controllingLog.states)")
        for log in [pair.controllingLog, pair.controlledLog] {
            XCTAssertTrue(log.waitForGathering())
            let kinds = Set(try log.localCandidates.map { try ICECandidate.parse($0).type })
            XCTAssertTrue(kinds.isSuperset(of: [.host, .relay]), "\(log.localCandidates)")
            XCTAssertEqual(log.selectedPair?.local.type, .host, "host pairs outrank relayed ones")
        }
        try pair.exchange(self, count: 2)
    }

    /// On loopback the mapped address coturn reports is the host address itself, and libnice
    /// keeps no server-reflexive candidate equal to its base (RFC 8445 §5.1.3 "redundant"):
    /// the Binding transaction is answered (gathering ends well before libnice's 2 s discovery
    /// timeout would end it), and only the host candidate is offered.
    func testSTUNGatheringAgainstCoturnOnLoopbackYieldsNoRedundantServerReflexiveCandidate() throws {
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, servers: [coturn.stunServer], localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        let started = Date()
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering(), "\(log.all)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5, "answered, not timed out")
        let candidates = try log.localCandidates.map(ICECandidate.parse)
        XCTAssertEqual(candidates.map(\.type), [.host])
        XCTAssertNil(log.failure)
    }

    func testClosingWhileTheTURNServerIsStoppedTakesAboutASecondAndAHalfAtMost() throws {
        let (coturn, pair) = try relayOnlyPair(transport: "udp")
        defer { coturn.stop() }
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected(30))
        XCTAssertTrue(ProcessStop.stop(coturn.pid))
        let started = Date()
        pair.close()
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertLessThan(elapsed, 2 * 2.0, "two agents, each bounded by the shortened Refresh timers")
    }
}

/// Server-reflexive gathering where the mapped address differs from the host one.
final class ICEAgentReflexiveTests: XCTestCase {
    func testAStunServerThatSeesANATedAddressYieldsAServerReflexiveCandidateBasedOnTheHostOne() throws {
        let stun = try ReflectingSTUNServer(mappedAddress: [203, 0, 113, 7], mappedPort: 40_000)
        defer { stun.stop() }
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlled, servers: [ICEServer(urls: ["stun:127.0.0.1:\(stun.port)"])],
                                                  localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering(), "\(log.all)")
        let candidates = try log.localCandidates.map(ICECandidate.parse)
        let host = try XCTUnwrap(candidates.first { $0.type == .host }, "\(log.localCandidates)")
        let reflexive = try XCTUnwrap(candidates.first { $0.type == .srflx }, "\(log.localCandidates), \(stun.bindingsAnswered) answered")
        XCTAssertEqual(reflexive.connectionAddress, "203.0.113.7")
        XCTAssertEqual(reflexive.port, 40_000)
        XCTAssertEqual(reflexive.relatedAddress, "127.0.0.1")
        XCTAssertEqual(reflexive.relatedPort, host.port)
        XCTAssertGreaterThan(stun.bindingsAnswered, 0)
    }

    func testRelayOnlyNeverOffersHostOrServerReflexiveCandidatesEvenWithASTUNServer() throws {
        let stun = try ReflectingSTUNServer(mappedAddress: [203, 0, 113, 7], mappedPort: 40_000)
        defer { stun.stop() }
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlled, servers: [ICEServer(urls: ["stun:127.0.0.1:\(stun.port)"]), coturn.turnServer()],
                                                  relayOnly: true, localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering(), "\(log.all)")
        XCTAssertEqual(try log.localCandidates.map { try ICECandidate.parse($0).type }, [.relay], "\(log.localCandidates)")
        XCTAssertEqual(stun.bindingsAnswered, 0, "the STUN server is not even asked")
        XCTAssertNil(log.failure)
    }
}

/// Relayed agents give back their TURN sockets (UDP, and the TCP connections to the server).
final class ICEAgentRelayLeakTests: XCTestCase {
    func testRelayOnlyPairsOverUDPAndTCPGiveBackEveryDescriptorAndThreadOnClose() throws {
        let coturn = try CoturnFixture()
        defer { coturn.stop() }
        func connectAndClose(_ transport: String) throws {
            let pair = try ICEPair(servers: [coturn.turnServer(transport: transport)], relayOnly: true)
            try pair.start()
            XCTAssertTrue(pair.waitUntilConnected(30), "\(transport): \(pair.controllingLog.states)")
            pair.close()
        }
        try connectAndClose("udp")
        try connectAndClose("tcp")
        let baseline = ProcessResources.settled()
        for index in 0..<10 { try connectAndClose(index % 2 == 0 ? "udp" : "tcp") }
        baseline.assertReturned()
    }
}
