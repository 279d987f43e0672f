import TetherNet
import XCTest
import TetherSync

final class OutOfLineTests: XCTestCase {
    func testHoldsAnOptionalValueOutOfLine() {
        var box = OutOfLine<(code: UInt16, reason: String)>()
        XCTAssertTrue(box.isEmpty)
        XCTAssertNil(box.value)
        box.value = (1000, "bye")
        XCTAssertEqual(box.value?.code, 1000)
        box.value = (1001, "again")
        XCTAssertEqual(box.value?.reason, "again", "replaced, not appended")
        box.value = nil
        XCTAssertTrue(box.isEmpty)
    }

    func testCostsOneWordInItsOwner() {
        XCTAssertEqual(MemoryLayout<OutOfLine<(UInt64, UInt64, String)>>.size, 8)
    }
}
