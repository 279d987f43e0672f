import Foundation
import TetherRTC
import XCTest

/// Agents give back everything they took: sockets, the ICE thread, libnice's timers.
final class ICEAgentLeakTests: XCTestCase {
    func gatherAndClose() throws {
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"]), handler: log.record)
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering())
        agent.close()
    }

    /// Warms up what GLib and libnice keep for the process's life (GLib's worker thread, type
    /// registrations), so the baseline is taken with those in place.
    func warmedUpBaseline() throws -> ProcessResources {
        try gatherAndClose()
        let pair = try ICEPair()
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected())
        pair.close()
        return ProcessResources.settled()
    }

    func testCreatingAndClosing200AgentsReturnsDescriptorsAndThreadsToWhereTheyStarted() throws {
        let baseline = try warmedUpBaseline()
        var peak = (fds: 0, threads: 0)
        // 100 connected pairs: sockets bound, checks run, a pair selected, consent timers armed.
        for index in 0..<100 {
            let pair = try ICEPair()
            try pair.start()
            XCTAssertTrue(pair.waitUntilConnected(), "pair \(index)")
            if index % 25 == 0 { try pair.exchange(self, count: 1) }
            peak = (max(peak.fds, ProcessResources.descriptors), max(peak.threads, ProcessResources.threads))
            pair.close()
        }
        XCTAssertGreaterThan(peak.fds, baseline.descriptors, "the agents did open sockets")
        XCTAssertGreaterThanOrEqual(peak.threads, baseline.threads + 2, "each agent had its own thread")
        baseline.assertReturned()
    }

    func testAgentsClosedBeforeGatheringFromTheirOwnHandlerOrByDeinitLeaveNothingBehind() throws {
        let baseline = try warmedUpBaseline()
        for _ in 0..<20 {
            // Never gathered.
            try ICEAgent(ICEConfiguration(role: .controlled, localAddresses: ["127.0.0.1"])) { _ in }.close()
            // Dropped without close(): deinit closes.
            _ = try ICEAgent(ICEConfiguration(role: .controlled, localAddresses: ["127.0.0.1"])) { _ in }
            // Closed from inside its handler, on the ICE thread itself.
            let box = AgentBox()
            // A semaphore, not an XCTest expectation: the first wait(for:) gives the main run
            // loop a descriptor of its own, which would count as a leak here.
            let closed = DispatchSemaphore(value: 0)
            let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"])) { event in
                guard case .gatheringComplete = event, let agent = box.take() else { return }
                agent.close()
                closed.signal()
            }
            box.put(agent)
            try agent.startGathering()
            XCTAssertEqual(closed.wait(timeout: .now() + 10), .success)
            XCTAssertThrowsError(try agent.send([1])) { XCTAssertEqual($0 as? ICEError, .closed) }
        }
        baseline.assertReturned()
    }
}

/// Hands an agent to its own handler once it exists.
final class AgentBox: @unchecked Sendable {
    private let lock = NSLock()
    private var agent: ICEAgent?
    func put(_ agent: ICEAgent) { lock.withLock { self.agent = agent } }
    func take() -> ICEAgent? { lock.withLock { defer { agent = nil }; return agent } }
}
