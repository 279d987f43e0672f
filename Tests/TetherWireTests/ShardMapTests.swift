import TetherWire
import XCTest

/// The shard map a node publishes must pass every rule a client applies (relay.md §8.2).
final class ShardMapTests: XCTestCase {
    private let two = #"{"version":7,"ranges":[{"low":32768,"high":65535,"host":"relay2.iterm2.com"},{"low":0,"high":32767,"host":"relay1.iterm2.com:8443"}]}"#

    func testAValidMapParsesSortsByLowAndPrintsCompactly() throws {
        let map = try ShardMap(json: Array(two.utf8))
        XCTAssertEqual(map.version, 7)
        XCTAssertEqual(map.ranges.map(\.low), [0, 32768])
        XCTAssertEqual(map.json, #"{"version":7,"ranges":[{"low":0,"high":32767,"host":"relay1.iterm2.com:8443"},{"low":32768,"high":65535,"host":"relay2.iterm2.com"}]}"#)
        XCTAssertEqual(try ShardMap(json: Array(map.json.utf8)), map, "round trip")
        XCTAssertEqual(map.hosts, ["relay1.iterm2.com:8443", "relay2.iterm2.com"])
    }

    func testOwnerLookupAtEveryRangeEdgeAndForTheVectorRooms() throws {
        let map = try ShardMap(version: 1, ranges: [
            .init(low: 0, high: 0, host: "a"), .init(low: 1, high: 48135, host: "b"),
            .init(low: 48136, high: 53374, host: "c"), .init(low: 53375, high: 65535, host: "d"),
        ])
        XCTAssertEqual([0, 1, 48135, 48136, 53374, 53375, 65535].map { map.owner(of: $0) }, ["a", "b", "b", "c", "c", "d", "d"])
        // relay.md §8.1 vectors: buckets 57888, 53374, 48136.
        let rooms = ["611c035897cf71eebc08e531616a3470f666cd001532e1bd4957dd762efae220",
                     "de5613dbe578aeb70a6885a481e0252dbc4bb279bcb120235a38cda8a999d07e",
                     "28396c094119a4f1948f69a5ab2971d8126fdc11c040a280b912f1a48f56bc08"].map { RoomName(header: $0)! }
        XCTAssertEqual(rooms.map { map.owner(of: $0) }, ["d", "c", "c"])
        XCTAssertEqual(try ShardMap.single(host: "solo").owner(of: 65535), "solo")
    }

    func testEveryClientRuleIsEnforced() {
        func invalid(_ json: String) -> ShardMap.Invalid? {
            do { _ = try ShardMap(json: Array(json.utf8)); return nil } catch { return error }
        }
        func range(_ low: String, _ high: String, _ host: String = "\"h\"") -> String {
            #"{"version":1,"ranges":[{"low":\#(low),"high":\#(high),"host":\#(host)}]}"#
        }
        XCTAssertEqual(invalid("[]"), .notJSON)
        XCTAssertEqual(invalid(#"{"version":"1","ranges":[]}"#), .notJSON)
        XCTAssertEqual(invalid(#"{"version":1}"#), .notJSON)
        XCTAssertEqual(invalid(#"{"version":-1,"ranges":[{"low":0,"high":65535,"host":"h"}]}"#), .badVersion)
        XCTAssertEqual(invalid(#"{"version":1.5,"ranges":[{"low":0,"high":65535,"host":"h"}]}"#), .badVersion)
        XCTAssertEqual(invalid(#"{"version":1,"ranges":[]}"#), .noRanges)
        XCTAssertNil(invalid(range("0", "65535")))
        XCTAssertNil(invalid(range("0.0", "65535")), "an integral number is an integer")
        XCTAssertEqual(invalid(range("-1", "65535")), .badRange(0))
        XCTAssertEqual(invalid(range("0", "65536")), .badRange(0))
        XCTAssertEqual(invalid(range("0", "1.5")), .badRange(0))
        XCTAssertEqual(invalid(range("\"0\"", "65535")), .badRange(0))
        XCTAssertEqual(invalid(#"{"version":1,"ranges":[{"low":9,"high":8,"host":"h"}]}"#), .badRange(0))
        for host in ["\"\"", "\"a/b\"", "\"a@b\"", "\"a?b\"", "\"a#b\"", "\"a b\"", "\"a\\tb\"", "\"Relay.example\"", "\"relay.example.\"",
                     "\"a\\\"b\"", "\"a\\\\b\"", "\"a\\u0001b\"", "1", "null"] {
            XCTAssertEqual(invalid(range("0", "65535", host)), .badHost(0), host)
        }
        XCTAssertNil(invalid(range("0", "65535", "\"xn--bcher-kva.example:8443\"")))
        // Tiling: a gap, an overlap, a short end, a late start.
        XCTAssertEqual(invalid(#"{"version":1,"ranges":[{"low":0,"high":10,"host":"a"},{"low":12,"high":65535,"host":"b"}]}"#), .notTiling)
        XCTAssertEqual(invalid(#"{"version":1,"ranges":[{"low":0,"high":10,"host":"a"},{"low":10,"high":65535,"host":"b"}]}"#), .notTiling)
        XCTAssertEqual(invalid(range("0", "65534")), .notTiling)
        XCTAssertEqual(invalid(range("1", "65535")), .notTiling)
        XCTAssertEqual(invalid("{\"version\":1,\"ranges\":[{\"low\":0,\"high\":65535,\"host\":\"h\"}]} x"), .notJSON, "trailing garbage")
    }

    func testUnknownMembersAreIgnored() throws {
        let map = try ShardMap(json: Array(#"{"version":0,"buckets":65536,"ranges":[{"low":0,"high":65535,"host":"h","weight":2}]}"#.utf8))
        XCTAssertEqual(map.version, 0)
        XCTAssertEqual(map.json, #"{"version":0,"ranges":[{"low":0,"high":65535,"host":"h"}]}"#)
    }
}
