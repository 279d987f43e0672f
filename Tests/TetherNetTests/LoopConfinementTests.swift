import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

/// Who may touch a loop's confined state (what `assertInEventLoop` checks in debug builds).
final class LoopConfinementTests: XCTestCase {
    func testANeverStartedLoopBelongsToWhoeverHoldsIt() throws {
        let loop = try EventLoop(clock: ManualClock())
        XCTAssertTrue(loop.isConfinedToCurrentThread)
        XCTAssertFalse(loop.inEventLoop, "no thread runs it")
        let elsewhere = Locked<Bool?>(nil)
        let thread = Thread { elsewhere.mutate { $0 = loop.isConfinedToCurrentThread } }
        thread.start()
        eventually("the other thread looked", within: 5, poll: 0.001) { elsewhere.value != nil }
        XCTAssertEqual(elsewhere.value, true, "set-up may happen on any thread before the loop runs")
        // Set-up calls that assert pass here: a timer scheduled and fired without a thread.
        var fired = false
        loop.schedule(after: .milliseconds(0)) { fired = true }
        loop.runTimers()
        XCTAssertTrue(fired)
    }

    func testAStartedLoopBelongsToItsThreadAloneUntilItStops() throws {
        let group = try EventLoopGroup(count: 1)
        let loop = group.loops[0]
        XCTAssertFalse(loop.isConfinedToCurrentThread, "the test thread may not touch a running loop")
        XCTAssertTrue(try loop.submitAndWait { loop.isConfinedToCurrentThread && loop.inEventLoop })
        group.shutdown()
        XCTAssertTrue(loop.isConfinedToCurrentThread, "a stopped (joined) loop belongs to its holder again")
    }

    func testALoopRunByHandBelongsToTheThreadRunningIt() throws {
        let loop = try EventLoop()
        let seen = Locked<[Bool]>([])
        let runner = Thread { loop.run() }
        runner.start()
        // Once the thread is inside run(), a task sees itself as the owner and the test does not.
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            seen.mutate { $0.append(loop.isConfinedToCurrentThread) }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(seen.value, [true])
        XCTAssertFalse(loop.isConfinedToCurrentThread)
        loop.shutdown()
        eventually("the runner thread finished", within: 5, poll: 0.001) { runner.isFinished }
        XCTAssertTrue(loop.isConfinedToCurrentThread)
    }
}
