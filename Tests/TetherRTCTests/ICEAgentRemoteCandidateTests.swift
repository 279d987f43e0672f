import Foundation
import TetherRTC
import TetherTestSupport
import TetherWire
import XCTest

/// Remote candidates from the peer's signals: a malformed one is an error for the call (which
/// ends it), never a crash, and the agent is otherwise unaffected.
final class ICEAgentRemoteCandidateTests: XCTestCase {
    func error(_ body: () throws -> Void) -> ICEError? {
        do {
            try body()
            return nil
        } catch {
            return error as? ICEError
        }
    }

    func testAMalformedRemoteCandidateIsASpecificErrorAndTheAgentStillConnects() throws {
        let pair = try ICEPair()
        defer { pair.close() }
        // The exact grammar errors are ICECandidateTests'; here each must be refused as
        // malformed, before libnice sees it.
        let malformed = [
            "", "a=candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ host", "candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ",
            "candidate:1 1 UDP 2015364095 127.0.0.1 70000 typ host", "candidate:1 1 UDP 2015364095 127.0.0.1 -1 typ host",
            "candidate:1 1 UDP 99999999999 127.0.0.1 5000 typ host", "candidate:1 1 UDP 2015364095 127.0.0.1 5000 type host",
            "candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ host generation", "candidate:1  1 UDP 2015364095 127.0.0.1 5000 typ host",
            "candidate:\u{0} 1 UDP 2015364095 127.0.0.1 5000 typ host", "candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ srflx raddr 1.2.3.4.5 rport 9",
        ]
        for value in malformed {
            guard case .malformedCandidate? = error({ try pair.controlling.addRemoteCandidate(value) }) else {
                XCTFail("not refused as malformed: \(value.prefix(80))")
                continue
            }
        }
        XCTAssertEqual(error { try pair.controlling.addRemoteCandidate("candidate:1 2 UDP 2015364095 127.0.0.1 5000 typ host") }, .unexpectedComponent(2))
        // Well formed but nothing this agent can pair: dropped, not an error.
        for unusable in ["candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ bogus", "candidate:1 1 SCTP 2015364095 127.0.0.1 5000 typ host"] {
            XCTAssertEqual(try pair.controlling.addRemoteCandidate(unusable), false, unusable)
        }
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected(), "\(pair.controllingLog.states)")
        try pair.exchange(self, count: 1)
        XCTAssertNil(pair.controllingLog.failure)
    }

    func testValidCandidatesTheAgentCannotUseAreDroppedNotErrorsAndBrowserExtensionsAreAccepted() throws {
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlled, localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        try agent.setRemoteCredentials(.random())
        XCTAssertFalse(try agent.addRemoteCandidate("candidate:2 1 TCP 1518280447 127.0.0.1 9 typ host tcptype active"), "ICE-TCP is off")
        XCTAssertFalse(try agent.addRemoteCandidate("candidate:3 1 udp 2113937151 5b1c4f3e-6a1d-4c1f-9f0e-0123456789ab.local 54400 typ host generation 0"),
                       "an mDNS name libnice cannot resolve")
        XCTAssertTrue(try agent.addRemoteCandidate("candidate:4 1 udp 1686052607 203.0.113.9 40000 typ srflx raddr 192.168.1.2 rport 40000 generation 0 ufrag abcd network-id 1"))
        XCTAssertTrue(try agent.addRemoteCandidate("candidate:5 1 UDP 2015364095 ::1 5000 typ host"))
        // Jobs run in order: once gathering (posted last) is done, libnice has taken both.
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering())
        XCTAssertNil(log.failure, "libnice accepted what Tether parsed")
    }

    func testEveryMethodThrowsClosedAfterClose() throws {
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"])) { _ in }
        agent.close()
        agent.close()
        XCTAssertEqual(error { try agent.startGathering() }, .closed)
        XCTAssertEqual(error { try agent.setRemoteCredentials(.random()) }, .closed)
        XCTAssertEqual(error { try agent.addRemoteCandidate("candidate:1 1 UDP 2015364095 127.0.0.1 5000 typ host") }, .closed)
        XCTAssertEqual(error { try agent.endOfRemoteCandidates() }, .closed)
        XCTAssertEqual(error { try agent.send([1, 2, 3]) }, .closed)
    }

    func testAnOversizedDatagramIsRefusedWhereItIsSent() throws {
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"])) { _ in }
        defer { agent.close() }
        XCTAssertEqual(error { try agent.send([UInt8](repeating: 0, count: ICEAgent.maxDatagramSize + 1)) }, .datagramTooLarge(ICEAgent.maxDatagramSize + 1))
        XCTAssertNoThrow(try agent.send([UInt8](repeating: 0, count: ICEAgent.maxDatagramSize)), "dropped (no pair yet), not refused")
    }

    func testAPeerThatNeverAnswersChecksFailsOnceItsCandidatesHaveEnded() throws {
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"]), handler: log.record)
        defer { agent.close() }
        try agent.setRemoteCredentials(.random())
        try agent.startGathering()
        // A UDP port held by a socket that never reads: nothing there answers a check.
        let silent = RefusingPort(datagram: true)
        defer { withExtendedLifetime(silent) {} }
        try agent.addRemoteCandidate("candidate:1 1 UDP 2015364095 127.0.0.1 \(silent.port) typ host")
        try agent.endOfRemoteCandidates()
        XCTAssertTrue(log.waitForFailure(40), "\(log.states)")
        XCTAssertEqual(log.failure, .connectivityChecksFailed)
        guard case .failed? = log.states.last else { return XCTFail("failed is final: \(log.states)") }
    }
}
