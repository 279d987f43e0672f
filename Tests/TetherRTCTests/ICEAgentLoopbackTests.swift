import Foundation
import TetherRTC
import XCTest

/// Two libnice agents in one process, on loopback, with host candidates trickled to each other.
final class ICEAgentLoopbackTests: XCTestCase {
    func testTwoAgentsConnectOnLoopbackWithTrickledHostCandidatesAndExchangeDatagramsBothWays() throws {
        let pair = try ICEPair()
        defer { pair.close() }
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected(), "controlling: \(pair.controllingLog.states), controlled: \(pair.controlledLog.states)")
        for log in [pair.controllingLog, pair.controlledLog] {
            XCTAssertTrue(log.waitForGathering())
            XCTAssertFalse(log.localCandidates.isEmpty)
            for value in log.localCandidates {
                let candidate = try ICECandidate.parse(value)
                XCTAssertEqual(candidate.type, .host, value)
                XCTAssertEqual(candidate.connectionAddress, "127.0.0.1", value)
                XCTAssertEqual(candidate.transport, .udp, value)
                XCTAssertFalse(value.hasPrefix("a="))
            }
            let selected = try XCTUnwrap(log.selectedPair)
            XCTAssertEqual(selected.local.type, .host)
            XCTAssertEqual(selected.remote.type, .host)
            XCTAssertNil(log.failure)
        }
        XCTAssertEqual(pair.controllingLog.selectedPair?.local.port, pair.controlledLog.selectedPair?.remote.port)
        try pair.exchange(self)
        XCTAssertTrue(pair.forwardingErrors.isEmpty, "\(pair.forwardingErrors)")
    }
}
