@testable import TetherRelay
import XCTest

final class SmallMapTests: XCTestCase {
    func testBehavesLikeADictionaryInInsertionOrder() {
        var map = SmallMap<Int, String>()
        XCTAssertTrue(map.isEmpty)
        map[3] = "c"
        map[1] = "a"
        map[2] = "b"
        XCTAssertEqual(map.keys, [3, 1, 2], "insertion order")
        XCTAssertEqual(map[1], "a")
        XCTAssertNil(map[9])
        map[1] = "A"
        XCTAssertEqual(map.values, ["c", "A", "b"], "replaced in place")
        XCTAssertEqual(map.removeValue(forKey: 3), "c")
        XCTAssertNil(map.removeValue(forKey: 3))
        map[2] = nil
        XCTAssertEqual(map.count, 1)
        XCTAssertEqual(map.first { $0.value == "A" }?.key, 1)
        map[9] = nil
        XCTAssertEqual(map.count, 1, "removing an absent key changes nothing")
        map.removeValue(forKey: 1)
        XCTAssertTrue(map.isEmpty)
    }
}
