import Glibc
import Synchronization
import TetherNet
import TetherService
import TetherTestSupport
import XCTest

final class ChoresTests: XCTestCase {
    private enum Chore: Hashable, Sendable { case sweep, push }

    private var group: EventLoopGroup!
    private var loop: EventLoop { group.loops[0] }

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    /// Waits until every task queued on the loop so far has run.
    private func settle() throws { try loop.submitAndWait {} }

    func testAChoreRunsOnItsLoopNowIfAskedAndThenEveryInterval() throws {
        let chores = Chores<Chore>(loop: loop)
        let runs = Atomic(0)
        let onLoop = Atomic(true)
        let loop = self.loop
        chores.start(.sweep, every: .milliseconds(10), runNow: true) {
            if !loop.inEventLoop { onLoop.store(false, ordering: .relaxed) }
            runs.add(1, ordering: .relaxed)
        }
        try settle()
        XCTAssertGreaterThanOrEqual(runs.load(ordering: .relaxed), 1, "runNow ran it at once")
        eventually("five runs", within: 5, poll: 0.002) { runs.load(ordering: .relaxed) >= 5 }
        XCTAssertGreaterThanOrEqual(runs.load(ordering: .relaxed), 5)
        XCTAssertTrue(onLoop.load(ordering: .relaxed))
        chores.stopAll()
    }

    func testStartingARunningChoreAgainDoesNotScheduleItTwice() throws {
        let chores = Chores<Chore>(loop: loop)
        let runs = Atomic(0)
        for _ in 0..<5 { chores.start(.push, every: .milliseconds(60_000), runNow: true) { runs.add(1, ordering: .relaxed) } }
        try settle()
        XCTAssertEqual(runs.load(ordering: .relaxed), 1)
        XCTAssertTrue(chores.isRunning(.push))
        XCTAssertFalse(chores.isRunning(.sweep))
        chores.stop(.push)
        XCTAssertFalse(chores.isRunning(.push))
    }

    func testOnceStopReturnsTheBodyNeverRunsAgainAndTheChoreCanStartAfresh() throws {
        let chores = Chores<Chore>(loop: loop)
        let runs = Atomic(0)
        chores.start(.sweep, every: .milliseconds(5)) { runs.add(1, ordering: .relaxed) }
        eventually("two runs", within: 5, poll: 0.002) { runs.load(ordering: .relaxed) >= 2 }
        chores.stop(.sweep)
        let atStop = runs.load(ordering: .relaxed)
        usleep(60_000)   // must be a sleep: "never runs again" over a dozen intervals is the check
        XCTAssertEqual(runs.load(ordering: .relaxed), atStop)
        chores.start(.sweep, every: .milliseconds(5)) { runs.add(100, ordering: .relaxed) }
        eventually("the new body ran", within: 5, poll: 0.002) { runs.load(ordering: .relaxed) > atStop }
        XCTAssertEqual((runs.load(ordering: .relaxed) - atStop) % 100, 0, "only the new body runs")
        chores.stopAll()
    }

    func testAChoreMayStopItselfFromItsOwnBody() throws {
        let chores = Chores<Chore>(loop: loop)
        let runs = Atomic(0)
        chores.start(.sweep, every: .milliseconds(5)) {
            if runs.add(1, ordering: .relaxed).newValue == 3 { chores.stop(.sweep) }
        }
        eventually("the chore stopped itself", within: 5, poll: 0.002) { !chores.isRunning(.sweep) }
        usleep(40_000)   // must be a sleep: no fourth run over eight intervals is the check
        XCTAssertEqual(runs.load(ordering: .relaxed), 3)
    }
}
