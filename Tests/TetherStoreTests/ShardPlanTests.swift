import TetherStore
import TetherWire
import XCTest

final class ShardPlanTests: XCTestCase {
    private func buckets(_ map: ShardMap) -> [String: Int] {
        map.ranges.reduce(into: [:]) { $0[$1.host, default: 0] += $1.high - $1.low + 1 }
    }

    func testADeadNodesBucketsAreSpreadEvenlyOverTheSurvivorsAtTheNextVersion() throws {
        let map = try XCTUnwrap(ShardPlan.even(hosts: ["a.example", "b.example", "c.example"], version: 4))
        XCTAssertEqual(buckets(map), ["a.example": 21845, "b.example": 21845, "c.example": 21846])
        let next = try XCTUnwrap(ShardPlan.failover(map, dead: ["b.example"], survivors: ["a.example", "c.example"]))
        XCTAssertEqual(next.version, 5)
        XCTAssertEqual(buckets(next), ["a.example": 21845 + 10923, "c.example": 21846 + 10922])
        XCTAssertEqual(next.ranges.map(\.host), ["a.example", "c.example"], "b's first half joins a's range, its second c's")
        XCTAssertEqual(try ShardMap(json: Array(next.json.utf8)), next, "a map clients accept")
    }

    func testNothingChangesWithoutADeadOwnerOrWithoutASurvivor() throws {
        let map = try XCTUnwrap(ShardPlan.even(hosts: ["a.example", "b.example"], version: 1))
        XCTAssertNil(ShardPlan.failover(map, dead: ["z.example"], survivors: ["a.example"]), "a dead host that owns nothing")
        XCTAssertNil(ShardPlan.failover(map, dead: ["a.example", "b.example"], survivors: []), "nobody left to take them")
        XCTAssertNil(ShardPlan.failover(map, dead: ["a.example"], survivors: ["a.example"]), "a survivor is never a dead host")
    }

    func testRepeatedFailoversEvenOutOverWhoeverIsLeft() throws {
        var map = try XCTUnwrap(ShardPlan.even(hosts: ["a", "b", "c", "d"], version: 1))
        map = try XCTUnwrap(ShardPlan.failover(map, dead: ["a"], survivors: ["b", "c", "d"]))
        map = try XCTUnwrap(ShardPlan.failover(map, dead: ["b"], survivors: ["c", "d"]))
        let shares = buckets(map)
        XCTAssertEqual(Set(shares.keys), ["c", "d"])
        XCTAssertLessThanOrEqual(abs(shares["c"]! - shares["d"]!), 2)
        XCTAssertEqual(shares.values.reduce(0, +), RoomName.bucketCount)
        XCTAssertEqual(map.version, 3)
    }

    func testAnEvenMapGivesEveryHostOneContiguousRange() throws {
        let map = try XCTUnwrap(ShardPlan.even(hosts: ["b", "a", "b"], version: 9))
        XCTAssertEqual(map.ranges, [ShardMap.Range(low: 0, high: 32767, host: "a"), ShardMap.Range(low: 32768, high: 65535, host: "b")])
        XCTAssertNil(ShardPlan.even(hosts: [], version: 1))
    }

    /// A node that lost its buckets to a failover gets an even share back from those holding more;
    /// only those buckets move, so every other room stays where it is.
    func testAReturningNodeGetsAnEvenShareTakenOnlyFromTheNodesHoldingMore() throws {
        let even = try XCTUnwrap(ShardPlan.even(hosts: ["a", "b", "c"], version: 1))
        let failedOver = try XCTUnwrap(ShardPlan.failover(even, dead: ["c"], survivors: ["a", "b"]))
        let restored = try XCTUnwrap(ShardPlan.restore(failedOver, returning: ["c"]))
        XCTAssertEqual(restored.version, 3)
        XCTAssertEqual(buckets(restored), ["a": 21846, "b": 21845, "c": 21845])
        var moved = 0
        for bucket in stride(from: 0, to: RoomName.bucketCount, by: 7) {
            let before = failedOver.ranges.first { $0.low <= bucket && bucket <= $0.high }!.host
            let after = restored.ranges.first { $0.low <= bucket && bucket <= $0.high }!.host
            if before != after {
                XCTAssertEqual(after, "c", "a bucket moves only to the returning node")
                moved += 1
            }
        }
        XCTAssertLessThanOrEqual(moved, 21845 / 7 + 1, "no more than its share moves")
        XCTAssertEqual(try ShardMap(json: Array(restored.json.utf8)), restored, "a map clients accept")
        XCTAssertNil(ShardPlan.restore(restored, returning: ["c"]), "a node holding its share is owed nothing")
    }

    func testTwoReturningNodesShareWhatTheSurvivorHeld() throws {
        let lone = try XCTUnwrap(ShardPlan.even(hosts: ["a"], version: 7))
        let restored = try XCTUnwrap(ShardPlan.restore(lone, returning: ["b", "c"]))
        XCTAssertEqual(buckets(restored), ["a": 21846, "b": 21845, "c": 21845])
        XCTAssertEqual(restored.version, 8)
    }
}
