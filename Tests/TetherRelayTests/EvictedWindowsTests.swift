import TetherService
@testable import TetherRelay
import XCTest

final class EvictedWindowsTests: XCTestCase {
    /// A window that has started at `start` (one Proof), 10 s long as §3.4's.
    private func running(since start: UInt64) -> FixedWindow {
        var window = FixedWindow(limit: 40, window: .milliseconds(10_000))
        _ = window.hit(now: .milliseconds(start))
        return window
    }

    func testAKeptWindowIsTakenBackOnceWithItsCount() {
        var kept = EvictedWindows(capacity: 4)
        var window = running(since: 100)
        for _ in 0..<9 { _ = window.hit(now: .milliseconds(200)) }
        kept.keep(window, for: 7, now: .milliseconds(300))
        XCTAssertEqual(kept.take(7), window, "the count the room had reached comes back")
        XCTAssertNil(kept.take(7))
        XCTAssertTrue(kept.isEmpty)
    }

    func testAWindowThatHasRunOutIsNotKept() {
        var kept = EvictedWindows(capacity: 4)
        kept.keep(running(since: 0), for: 1, now: .milliseconds(10_001))
        kept.keep(FixedWindow(limit: 40, window: .milliseconds(10_000)), for: 2, now: .milliseconds(5))
        XCTAssertTrue(kept.isEmpty, "run out, or never started")
    }

    func testExpiredWindowsLeaveWhenTheNextIsKept() {
        var kept = EvictedWindows(capacity: 100)
        for key in 0..<10 { kept.keep(running(since: UInt64(key)), for: key, now: .milliseconds(20)) }
        XCTAssertEqual(kept.count, 10)
        kept.keep(running(since: 10_000), for: 99, now: .milliseconds(10_006))
        XCTAssertEqual(kept.count, 5, "windows 0-5 ran out by 10,006 ms (more than 10 s since their start); 6-9 and 99 still run")
        XCTAssertNil(kept.take(5))
        XCTAssertNotNil(kept.take(6))
    }

    func testAtCapacityTheOldestKeptGoesFirst() {
        var kept = EvictedWindows(capacity: 3)
        for key in 1...3 { kept.keep(running(since: 0), for: key, now: .milliseconds(1)) }
        kept.keep(running(since: 0), for: 4, now: .milliseconds(2))
        XCTAssertEqual(kept.count, 3)
        XCTAssertNil(kept.take(1), "the oldest made room")
        XCTAssertNotNil(kept.take(2))
        XCTAssertNotNil(kept.take(3))
        XCTAssertNotNil(kept.take(4))
    }

    func testARoomTakenBackAndEvictedAgainIsNotMistakenForTheOldest() {
        var kept = EvictedWindows(capacity: 3)
        for key in 1...3 { kept.keep(running(since: 0), for: key, now: .milliseconds(1)) }
        // Room 1 is resident again, then evicted again: now the newest.
        let window = kept.take(1)!
        kept.keep(window, for: 1, now: .milliseconds(2))
        kept.keep(running(since: 0), for: 4, now: .milliseconds(3))
        XCTAssertNil(kept.take(2), "2 was the oldest kept, not 1's stale first entry")
        XCTAssertNotNil(kept.take(1))
        XCTAssertNotNil(kept.take(3))
        XCTAssertNotNil(kept.take(4))
    }

    func testStaleEntriesBehindARunningWindowStayBoundedAndNeverCostItsPlace() {
        var kept = EvictedWindows(capacity: 8)
        // Room 1's window runs for the whole test and sits at the front of the order.
        kept.keep(running(since: 0), for: 1, now: .milliseconds(1))
        for round in 0..<1_000 {
            kept.keep(running(since: 0), for: 2, now: .milliseconds(2))
            XCTAssertLessThanOrEqual(kept.queued, 17, "round \(round): stale entries never exceed twice the capacity")
            XCTAssertNotNil(kept.take(2))
        }
        XCTAssertEqual(kept.count, 1)
        XCTAssertNotNil(kept.take(1), "the running window was kept although far below the cap")
    }

    func testAWindowThatRanOutBehindARunningOneLeavesWithinAWindowLength() {
        var kept = EvictedWindows(capacity: 100)
        kept.keep(running(since: 5_000), for: 1, now: .milliseconds(5_000))   // runs until 15,000
        kept.keep(running(since: 0), for: 2, now: .milliseconds(5_001))       // ran out at 10,000, kept behind 1
        kept.keep(running(since: 12_000), for: 3, now: .milliseconds(12_000))
        XCTAssertEqual(kept.count, 3, "2 waits behind 1, which still runs")
        kept.keep(running(since: 15_500), for: 4, now: .milliseconds(15_500))
        XCTAssertEqual(kept.count, 2, "once 1 ran out, 2 left with it")
        XCTAssertNil(kept.take(2))
        XCTAssertNotNil(kept.take(3))
    }

    func testAFullTableEvictsInOrderWellPastItsCapacity() {
        // At the cap with every window still running: each eviction is the oldest kept, many
        // times over the capacity (the consumed prefix of the order is reclaimed on the way).
        let capacity = 2_000
        var kept = EvictedWindows(capacity: capacity)
        for key in 0..<(capacity * 5) { kept.keep(running(since: 0), for: key, now: .milliseconds(1)) }
        XCTAssertEqual(kept.count, capacity)
        XCTAssertLessThanOrEqual(kept.queued, 2 * capacity + 1)
        XCTAssertNil(kept.take(capacity * 4 - 1))
        XCTAssertNotNil(kept.take(capacity * 4))
        XCTAssertNotNil(kept.take(capacity * 5 - 1))
    }
}
