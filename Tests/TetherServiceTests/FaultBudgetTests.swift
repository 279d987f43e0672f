import TetherService
import TetherSync
import TetherTestSupport
import XCTest

final class FaultBudgetTests: XCTestCase {
    func testMoreThanTheLimitWithinTheWindowExceedsIt() {
        var budget = FaultBudget(limit: 3, window: .seconds(1))
        XCTAssertEqual((0..<3).map { budget.record(now: .milliseconds(100 + $0)) }, [false, false, false])
        XCTAssertTrue(budget.record(now: .milliseconds(1_099)), "the fourth within 1 s")
    }

    func testFaultsSpreadBeyondTheWindowNeverExceedIt() {
        var budget = FaultBudget(limit: 3, window: .seconds(1))
        for i in 0..<100 { XCTAssertFalse(budget.record(now: .milliseconds(i * 334)), "\(i)") }
    }

    func testTheWindowSlidesAcrossAFixedBoundary() {
        var budget = FaultBudget(limit: 3, window: .seconds(1))
        XCTAssertFalse(budget.record(now: .milliseconds(900)))
        XCTAssertFalse(budget.record(now: .milliseconds(950)))
        XCTAssertFalse(budget.record(now: .milliseconds(1_050)))
        XCTAssertTrue(budget.record(now: .milliseconds(1_100)), "four within 200 ms, though they straddle a 1 s boundary")
    }

    func testTheReferenceFigures() {
        let budget = FaultBudget()
        XCTAssertEqual(budget.limit, 25)
        XCTAssertEqual(budget.window, .seconds(60))
    }
}
