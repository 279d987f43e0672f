import TetherService
@testable import TetherRelay
import XCTest

final class EvictedWindowsTests: XCTestCase {
    /// A window that has started at `start` (one Proof), 10 s long as §3.4's.
    private func running(since start: UInt64) -> FixedWindow {
        var window = FixedWindow(limit: 40, window: 10_000)
        _ = window.hit(now: start)
        return window
    }

    func testAKeptWindowIsTakenBackOnceWithItsCount() {
        var kept = EvictedWindows(capacity: 4)
        var window = running(since: 100)
        for _ in 0..<9 { _ = window.hit(now: 200) }
        kept.keep(window, for: 7, now: 300)
        XCTAssertEqual(kept.take(7), window, "the count the room had reached comes back")
        XCTAssertNil(kept.take(7))
        XCTAssertTrue(kept.isEmpty)
    }

    func testAWindowThatHasRunOutIsNotKept() {
        var kept = EvictedWindows(capacity: 4)
        kept.keep(running(since: 0), for: 1, now: 10_001)
        kept.keep(FixedWindow(limit: 40, window: 10_000), for: 2, now: 5)
        XCTAssertTrue(kept.isEmpty, "run out, or never started")
    }

    func testExpiredWindowsLeaveWhenTheNextIsKept() {
        var kept = EvictedWindows(capacity: 100)
        for key in 0..<10 { kept.keep(running(since: UInt64(key)), for: key, now: 20) }
        XCTAssertEqual(kept.count, 10)
        kept.keep(running(since: 10_000), for: 99, now: 10_006)
        XCTAssertEqual(kept.count, 5, "windows 0-5 ran out by 10,006 ms (more than 10 s since their start); 6-9 and 99 still run")
        XCTAssertNil(kept.take(5))
        XCTAssertNotNil(kept.take(6))
    }

    func testAtCapacityTheOldestKeptGoesFirst() {
        var kept = EvictedWindows(capacity: 3)
        for key in 1...3 { kept.keep(running(since: 0), for: key, now: 1) }
        kept.keep(running(since: 0), for: 4, now: 2)
        XCTAssertEqual(kept.count, 3)
        XCTAssertNil(kept.take(1), "the oldest made room")
        XCTAssertNotNil(kept.take(2))
        XCTAssertNotNil(kept.take(3))
        XCTAssertNotNil(kept.take(4))
    }

    func testARoomTakenBackAndEvictedAgainIsNotMistakenForTheOldest() {
        var kept = EvictedWindows(capacity: 3)
        for key in 1...3 { kept.keep(running(since: 0), for: key, now: 1) }
        // Room 1 is resident again, then evicted again: now the newest.
        let window = kept.take(1)!
        kept.keep(window, for: 1, now: 2)
        kept.keep(running(since: 0), for: 4, now: 3)
        XCTAssertNil(kept.take(2), "2 was the oldest kept, not 1's stale first entry")
        XCTAssertNotNil(kept.take(1))
        XCTAssertNotNil(kept.take(3))
        XCTAssertNotNil(kept.take(4))
    }

    func testRepeatedEvictionsOfOneRoomStayBounded() {
        var kept = EvictedWindows(capacity: 8)
        for round in 0..<10_000 {
            kept.keep(running(since: 0), for: 42, now: UInt64(round % 5_000))
            if round % 2 == 0 { _ = kept.take(42) }
        }
        XCTAssertLessThanOrEqual(kept.queued, 16, "stale entries never exceed twice the capacity")
        XCTAssertLessThanOrEqual(kept.count, 1)
    }

    func testAFullTableTakesConstantTimePerEviction() {
        // At the cap with every window still running: the old sweep filtered the whole table on
        // each eviction (65,536 entries, 20,000 evictions: over a billion visits).
        var kept = EvictedWindows(capacity: RoomTable.maxEvictedWindows)
        let start = ContinuousClock.now
        for key in 0..<(RoomTable.maxEvictedWindows + 20_000) { kept.keep(running(since: 0), for: key, now: 1) }
        XCTAssertEqual(kept.count, RoomTable.maxEvictedWindows)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(20), "linear, not quadratic")
        XCTAssertNil(kept.take(19_999))
        XCTAssertNotNil(kept.take(20_000))
    }
}
