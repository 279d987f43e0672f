import TetherStore
import TetherStoreContract
import XCTest

final class InMemoryPushStoreTests: XCTestCase {
    func testThePushStoreContract() throws { try PushStoreContract.verify { InMemoryPushStore() } }

    func testAnInjectedFailureIsThrownByEveryCallAndChangesNothing() throws {
        let store = InMemoryPushStore()
        let registration = MyttyRegistration(deviceToken: String(repeating: "a", count: 64), environment: .production, relaySecret: "S")
        try store.putMytty(registration, pushID: "p", expiresAt: 100)
        let full = PushStoreError("disk full")
        store.setFailure(full)
        XCTAssertThrowsError(try store.putMytty(registration, pushID: "q", expiresAt: 100)) { XCTAssertEqual($0 as? PushStoreError, full) }
        XCTAssertThrowsError(try store.putITerm(ITermRegistration(secretHash: "h", sandbox: false, registeredAt: 1), token: "t", expiresAt: 100))
        XCTAssertThrowsError(try store.mytty(pushID: "p", now: 0))
        XCTAssertThrowsError(try store.iterm(token: "t", now: 0))
        XCTAssertThrowsError(try store.renewMytty(pushID: "p", expiresAt: 500, now: 0))
        XCTAssertThrowsError(try store.deleteMytty(pushID: "p"))
        XCTAssertThrowsError(try store.deleteITerm(token: "t"))
        XCTAssertThrowsError(try store.pruneExpired(now: 1_000))
        XCTAssertThrowsError(try store.deviceCount(now: 0))
        store.setFailure(nil)
        XCTAssertEqual(try store.mytty(pushID: "p", now: 99), registration, "neither renewed, deleted nor pruned")
        XCTAssertNil(try store.mytty(pushID: "p", now: 100))
        XCTAssertNil(try store.mytty(pushID: "q", now: 0))
        XCTAssertNil(try store.iterm(token: "t", now: 0))
    }
}
