import TetherRelay
import TetherWire
import XCTest

final class ShardOwnershipTests: XCTestCase {
    private let low = RoomName(header: String(repeating: "0", count: 60) + "0010")!     // bucket 16
    private let high = RoomName(header: String(repeating: "0", count: 60) + "ff00")!    // bucket 65280

    private func halves(_ version: Int, _ first: String, _ second: String) throws -> ShardMap {
        try ShardMap(version: version, ranges: [.init(low: 0, high: 32767, host: first), .init(low: 32768, high: 65535, host: second)])
    }

    func testWithoutAMapThisNodeOwnsEveryBucketAndPublishesItselfAsVersionZero() {
        let ownership = ShardOwnership(origin: "https://relay.example.com:8443")
        XCTAssertEqual(ownership.host, "relay.example.com:8443")
        XCTAssertNil(ownership.foreignOwner(of: low))
        XCTAssertNil(ownership.foreignOwner(of: high))
        XCTAssertEqual(ownership.document?.json, #"{"version":0,"ranges":[{"low":0,"high":65535,"host":"relay.example.com:8443"}]}"#)
    }

    func testAMapNamesTheOwnerOfForeignBucketsOnlyAndAdoptionOnlyMovesForward() throws {
        let ownership = ShardOwnership(origin: "https://a.example")
        XCTAssertFalse(ownership.adopt(try halves(0, "b.example", "a.example")), "version 0 is the implicit map")
        XCTAssertTrue(ownership.adopt(try halves(3, "a.example", "b.example")))
        XCTAssertNil(ownership.foreignOwner(of: low))
        XCTAssertEqual(ownership.foreignOwner(of: high), "b.example")
        XCTAssertEqual(ownership.ownedBuckets(in: ownership.map!), 32768)
        XCTAssertFalse(ownership.adopt(try halves(3, "b.example", "a.example")), "an equal version is ignored, as clients do")
        XCTAssertFalse(ownership.adopt(try halves(2, "b.example", "a.example")))
        XCTAssertEqual(ownership.foreignOwner(of: high), "b.example")
        XCTAssertTrue(ownership.adopt(try halves(4, "b.example", "a.example")))
        XCTAssertEqual(ownership.foreignOwner(of: low), "b.example")
        XCTAssertNil(ownership.foreignOwner(of: high))
        XCTAssertEqual(ownership.document?.version, 4)
    }

    func testTheReshardReasonNamesTheOwnerWhileItFitsACloseFrame() {
        XCTAssertEqual(ShardOwnership.reshardReason(owner: "relay7.iterm2.com"), "reshard relay7.iterm2.com")
        XCTAssertEqual(ShardOwnership.reshardReason(owner: String(repeating: "a", count: 115)).utf8.count, 123)
        XCTAssertEqual(ShardOwnership.reshardReason(owner: String(repeating: "a", count: 116)), "reshard", "clients also accept the bare word")
    }
}
