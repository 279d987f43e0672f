import Foundation
import TetherStore
import TetherStoreContract
import TetherWire
import XCTest

final class DelayedRoomStoreTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "d", count: 64))!

    /// A decorator that dropped or misrouted a call would break the contract its base keeps.
    func testTheRoomStoreContractHoldsThroughTheDelay() throws {
        try RoomStoreContract.verify { DelayedRoomStore(InMemoryRoomStore(), delayMicroseconds: 1) }
    }

    func testEveryCallWaitsItsDelayFirst() throws {
        let store = DelayedRoomStore(InMemoryRoomStore(), delayMilliseconds: 2)
        let start = DispatchTime.now().uptimeNanoseconds
        try store.setVerifier("V", of: room, now: 1)
        XCTAssertEqual(try store.verifier(of: room), "V")
        _ = try store.admission(AdmissionQuery(ticket: nil, now: 1), of: RoomKey(room))   // one round trip, as a backend answers it
        XCTAssertGreaterThanOrEqual(DispatchTime.now().uptimeNanoseconds - start, 6_000_000)
    }
}
