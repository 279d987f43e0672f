import Foundation
import TetherRTC
import XCTest

/// Agents give back everything they took: sockets, the ICE thread, libnice's timers.
final class ICEAgentLeakTests: XCTestCase {
    static func count(_ directory: String) -> Int { (try? FileManager.default.contentsOfDirectory(atPath: directory).count) ?? -1 }
    static var descriptors: Int { count("/proc/self/fd") }
    static var threads: Int { count("/proc/self/task") }
    static var descriptorTargets: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).map {
            $0 + "->" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) ?? "?")
        }.sorted()
    }
    static var threadNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).compactMap {
            try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }.sorted()
    }

    /// libdispatch's worker threads (named after their root queue's QoS) come and go with
    /// whatever the test harness runs; every other thread must be one that was there before.
    static var threadsNotDispatchWorkers: [String] { threadNames.filter { !$0.contains("qos") } }

    struct Baseline {
        let fds: Int
        let threads: Int
        let named: [String]
    }

    /// Waits (up to 10 s: an exiting thread leaves /proc/self/task a moment after it is joined or
    /// detached) for the counts to be back at `baseline`: the same descriptors, no thread that
    /// was not there, and no more threads in all (dispatch workers may have retired meanwhile).
    func assertBack(to baseline: Baseline, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, Self.descriptors != baseline.fds || Self.threads > baseline.threads
                || Self.threadsNotDispatchWorkers != baseline.named { usleep(20_000) }
        XCTAssertEqual(Self.descriptors, baseline.fds, "open descriptors \(Self.descriptorTargets)", file: file, line: line)
        XCTAssertLessThanOrEqual(Self.threads, baseline.threads, "threads: \(Self.threadNames)", file: file, line: line)
        XCTAssertEqual(Self.threadsNotDispatchWorkers, baseline.named, file: file, line: line)
        XCTAssertFalse(Self.threadNames.contains("tether-ice"), file: file, line: line)
    }

    func gatherAndClose() throws {
        let log = ICEEventLog()
        let agent = try ICEAgent(ICEConfiguration(role: .controlling, localAddresses: ["127.0.0.1"]), handler: log.record)
        try agent.startGathering()
        XCTAssertTrue(log.waitForGathering())
        agent.close()
    }

    /// Warms up what GLib and libnice keep for the process's life (GLib's worker thread, type
    /// registrations), so the baseline is taken with those in place.
    func warmedUpBaseline() throws -> Baseline {
        try gatherAndClose()
        let pair = try ICEPair()
        try pair.start()
        XCTAssertTrue(pair.waitUntilConnected())
        pair.close()
        usleep(200_000)
        return Baseline(fds: Self.descriptors, threads: Self.threads, named: Self.threadsNotDispatchWorkers)
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
            peak = (max(peak.fds, Self.descriptors), max(peak.threads, Self.threads))
            pair.close()
        }
        XCTAssertGreaterThan(peak.fds, baseline.fds, "the agents did open sockets")
        XCTAssertGreaterThanOrEqual(peak.threads, baseline.threads + 2, "each agent had its own thread")
        assertBack(to: baseline)
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
        assertBack(to: baseline)
    }
}

/// Hands an agent to its own handler once it exists.
final class AgentBox: @unchecked Sendable {
    private let lock = NSLock()
    private var agent: ICEAgent?
    func put(_ agent: ICEAgent) { lock.withLock { self.agent = agent } }
    func take() -> ICEAgent? { lock.withLock { defer { agent = nil }; return agent } }
}
