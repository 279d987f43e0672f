import TetherRelay
import TetherWire
import XCTest

final class RoomIndexTests: XCTestCase {
    private final class Entry {
        let room: RoomName
        init(_ room: RoomName) { self.room = room }
    }

    private func room(_ digit: Character) -> RoomName { RoomName(header: String(repeating: digit, count: 64))! }

    func testFindsInsertsAndRemovesByName() {
        var index = RoomIndex<Entry> { $0.room }
        let a = Entry(room("a")), b = Entry(room("b"))
        index.insert(a)
        index.insert(b)
        XCTAssertTrue(index[room("a")] === a)
        XCTAssertTrue(index[room("b")] === b)
        XCTAssertNil(index[room("c")])
        XCTAssertEqual(index.count, 2)
        index.remove(room("a"))
        XCTAssertNil(index[room("a")])
        index.remove(room("c"))
        XCTAssertEqual(index.count, 1)
        XCTAssertTrue(index.values.first === b)
    }

    func testRoomsWhoseHashesCollideAreKeptApart() {
        // Every name hashes alike here, as if an attacker had found a collision.
        var index = RoomIndex<Entry>(hash: { _ in 42 }) { $0.room }
        let entries = ["1", "2", "3"].map { Entry(room(Character($0))) }
        for entry in entries { index.insert(entry) }
        for entry in entries { XCTAssertTrue(index[entry.room] === entry) }
        XCTAssertNil(index[room("4")])
        index.remove(entries[0].room)
        XCTAssertNil(index[entries[0].room])
        XCTAssertTrue(index[entries[1].room] === entries[1])
        XCTAssertTrue(index[entries[2].room] === entries[2])
        XCTAssertEqual(index.count, 2)
        index.remove(entries[2].room)
        XCTAssertTrue(index[entries[1].room] === entries[1])
        XCTAssertEqual(index.values.count, 1)
    }
}
