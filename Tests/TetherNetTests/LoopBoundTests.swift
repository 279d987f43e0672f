import TetherNet
import XCTest

/// State bound to a loop: made anywhere before the loop runs, then read and written on it.
final class LoopBoundTests: XCTestCase {
    func testAValueMadeBeforeTheLoopRunsIsReadAndWrittenOnTheLoop() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let bound = LoopBound([1], loop: loop)
        let seen = try loop.submitAndWait { () -> [Int] in
            bound.value.append(2)
            bound.withValue { $0.append(3) }
            return bound.value
        }
        XCTAssertEqual(seen, [1, 2, 3])
        XCTAssertTrue(bound.loop === loop)
    }
}
