import TetherSync
import XCTest

final class InstantTests: XCTestCase {
    func testAnInstantPlusADurationMovesByExactlyThatManyNanoseconds() {
        let t = MonotonicInstant(nanoseconds: 5_000_000_000)
        XCTAssertEqual((t + .milliseconds(1_500)).nanoseconds, 6_500_000_000)
        XCTAssertEqual((t + .nanoseconds(1)).nanoseconds, 5_000_000_001)
        XCTAssertEqual((t - .seconds(2)).nanoseconds, 3_000_000_000)
        XCTAssertEqual((t + .seconds(-2)).nanoseconds, 3_000_000_000, "a negative duration moves earlier")
    }

    func testTheDifferenceOfTwoInstantsIsSignedAndElapsedNeverNegative() {
        let early = MonotonicInstant(nanoseconds: 1_000), late = MonotonicInstant(nanoseconds: 4_000)
        XCTAssertEqual(late - early, .nanoseconds(3_000))
        XCTAssertEqual(early - late, .nanoseconds(-3_000))
        XCTAssertEqual(late.elapsed(since: early), .nanoseconds(3_000))
        XCTAssertEqual(early.elapsed(since: late), .zero, "a reading from another thread a moment later is not a negative age")
    }

    func testArithmeticClampsAtTheOriginAndAtTheEndInsteadOfTrapping() {
        XCTAssertEqual((MonotonicInstant.zero - .seconds(1)), .zero)
        XCTAssertEqual((MonotonicInstant(nanoseconds: .max - 1) + .seconds(1)).nanoseconds, .max)
        XCTAssertEqual((WallInstant(unixMilliseconds: 10) - .seconds(1)).unixMilliseconds, 0, "never before 1970")
    }

    func testDurationsConvertRoundingTowardZeroAndClampingToInt64() {
        XCTAssertEqual(Duration.milliseconds(1_500).nanosecondsClamped, 1_500_000_000)
        XCTAssertEqual(Duration.nanoseconds(1_999_999).millisecondsClamped, 1)
        XCTAssertEqual(Duration.nanoseconds(-1_999_999).millisecondsClamped, -1)
        XCTAssertEqual(Duration.seconds(Int64.max).nanosecondsClamped, .max)
        XCTAssertEqual(Duration.seconds(Int64.min).nanosecondsClamped, .min)
        XCTAssertEqual(Duration.milliseconds(2_250).secondsDouble, 2.25, accuracy: 1e-12)
    }

    func testWallTimeKeepsMillisecondsAndRoundsSecondsDown() {
        let t = WallInstant(unixMilliseconds: 1_700_000_000_999)
        XCTAssertEqual(t.unixSeconds, 1_700_000_000)
        XCTAssertEqual(WallInstant(unixSeconds: 1_700_000_000).unixMilliseconds, 1_700_000_000_000)
        XCTAssertEqual((t + .days(1)).unixMilliseconds, 1_700_086_400_999)
        XCTAssertEqual(WallInstant(unixMilliseconds: 5_000) - WallInstant(unixMilliseconds: 2_000), .seconds(3))
    }

    func testBothClocksReadTheSystemAndTheMonotonicOneNeverGoesBack() {
        var previous = MonotonicInstant.now()
        for _ in 0..<1_000 {
            let next = MonotonicInstant.now()
            XCTAssertGreaterThanOrEqual(next, previous)
            previous = next
        }
        // 2020-01-01: any machine running this has a clock past it.
        XCTAssertGreaterThan(WallInstant.now(), WallInstant(unixSeconds: 1_577_836_800))
    }
}

private extension Duration {
    static func days(_ count: Int64) -> Duration { .seconds(count * 86_400) }
}
