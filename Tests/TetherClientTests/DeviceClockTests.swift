import TetherDevice
import TetherTestSupport
import XCTest

/// The SDK's clock as tests drive it: sleepers wake when the clock passes their deadline, and a
/// cancelled one leaves at once.
final class DeviceClockTests: XCTestCase {
    func testASleeperWakesOnlyOnceTheClockPassesItsDeadline() async {
        let clock = ManualDeviceClock()
        let woke = expectation(description: "woke")
        let sleeper = Task {
            await clock.sleep(for: .seconds(10))
            woke.fulfill()
        }
        await eventually("the task sleeps on the clock") { clock.sleeping == 1 }
        clock.advance(by: .seconds(9))
        XCTAssertEqual(clock.sleeping, 1, "nine seconds in, the ten-second sleep goes on")
        clock.advance(by: .seconds(1))
        await fulfillment(of: [woke], timeout: 5)
        XCTAssertEqual(clock.sleeping, 0)
        _ = await sleeper.value
    }

    func testOneAdvancePastEveryDeadlineWakesEverySleeper() async {
        let clock = ManualDeviceClock()
        let tasks = [3, 1, 2].map { seconds in
            Task { () -> Int in
                await clock.sleep(for: .seconds(Double(seconds)))
                return seconds
            }
        }
        await eventually("all three sleep on the clock") { clock.sleeping == 3 }
        clock.advance(by: .seconds(5))
        var woken: Set<Int> = []
        for task in tasks { woken.insert(await task.value) }
        XCTAssertEqual(woken, [1, 2, 3])
        XCTAssertEqual(clock.sleeping, 0)
    }

    func testACancelledSleeperReturnsAtOnceAndLeavesTheClock() async {
        let clock = ManualDeviceClock()
        let sleeper = Task { await clock.sleep(for: .seconds(60)) }
        await eventually("the task sleeps on the clock") { clock.sleeping == 1 }
        sleeper.cancel()
        _ = await sleeper.value
        XCTAssertEqual(clock.sleeping, 0, "nothing is left for a later advance to resume")
    }

    func testASleepThatIsNotPositiveDoesNotWaitForTheClock() async {
        let clock = ManualDeviceClock()
        await clock.sleep(for: .zero)
        await clock.sleep(for: .seconds(-1))
        XCTAssertEqual(clock.sleeping, 0)
    }

    func testTheTimeLeftUntilADeadlineFollowsTheClock() {
        let clock = ManualDeviceClock()
        let deadline = clock.now.advanced(by: .seconds(120))
        XCTAssertEqual(deadline - clock.now, .seconds(120))
        clock.advance(by: .milliseconds(119_500))
        XCTAssertEqual(deadline - clock.now, .milliseconds(500))
        clock.advance(by: .seconds(1))
        XCTAssertLessThan(deadline - clock.now, .zero)
    }
}
