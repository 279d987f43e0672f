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

    /// The first entry lives inline: removing it promotes the next, in insertion order, and
    /// nothing is lost or reordered across the inline entry and the rest.
    func testRemovingTheFirstEntryPromotesTheNextInOrder() {
        var map = SmallMap<Int, String>()
        for key in 1...5 { map[key] = String(key) }
        XCTAssertEqual(map.removeValue(forKey: 1), "1")
        XCTAssertEqual(map.keys, [2, 3, 4, 5])
        map[2] = "two"
        XCTAssertEqual(map[2], "two", "the promoted entry is replaced in place")
        map[4] = nil
        XCTAssertEqual(Array(map.map(\.key)), [2, 3, 5])
        map[6] = "6"
        XCTAssertEqual(map.values, ["two", "3", "5", "6"])
        for key in [3, 2, 6, 5] { map.removeValue(forKey: key) }
        XCTAssertTrue(map.isEmpty)
        XCTAssertEqual(map.count, 0)
        map[7] = "7"
        XCTAssertEqual(map.keys, [7], "an emptied map takes a first entry again")
    }
}
