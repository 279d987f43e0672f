import TetherClient
import XCTest
import TetherDevice

final class RelaySignalTests: XCTestCase {
    func testClosesAreClassifiedAsTheShippingClientsDo() {
        XCTAssertEqual(RelaySignal.close(code: 4421, reason: "reshard relay7.iterm2.com"), .reResolve(owner: "relay7.iterm2.com"))
        XCTAssertEqual(RelaySignal.close(code: 1000, reason: "reshard"), .reResolve(owner: nil))
        XCTAssertEqual(RelaySignal.close(code: 1001, reason: "reshard relay2"), .reResolve(owner: "relay2"))
        XCTAssertEqual(RelaySignal.close(code: 4421, reason: ""), .reResolve(owner: nil))
        XCTAssertEqual(RelaySignal.close(code: 1000, reason: "resharding now"), .transient, "not a re-resolve signal")
        XCTAssertEqual(RelaySignal.close(code: 1008, reason: "daily quota exceeded"), .quotaExceeded)
        XCTAssertEqual(RelaySignal.close(code: 1000, reason: "displaced"), .displaced)
        for (code, reason) in [(1008, "rate limited"), (1001, "peer gone"), (1000, "room deleted"), (1006, ""), (1001, "server shutting down")] {
            XCTAssertEqual(RelaySignal.close(code: UInt16(code), reason: reason), .transient, reason)
        }
        XCTAssertEqual(RelaySignal.quotaExceeded.fixedDelay, .seconds(1800))
        XCTAssertEqual(RelaySignal.displaced.fixedDelay, .seconds(60))
        XCTAssertNil(RelaySignal.transient.fixedDelay)
    }

    func testHTTPStatusesAreClassified() {
        XCTAssertEqual(RelaySignal.http(status: 421, owner: "relay2.example"), .reResolve(owner: "relay2.example"))
        XCTAssertEqual(RelaySignal.http(status: 429), .transient)
        XCTAssertEqual(RelaySignal.http(status: 503), .transient)
        XCTAssertEqual(RelaySignal.http(status: 500), .transient)
        for status in [400, 401, 403, 404, 413] { XCTAssertEqual(RelaySignal.http(status: status), .fatal, "\(status)") }
    }

    func testBackoffBoundsAreThreeFourEightSixteenThenThirty() {
        XCTAssertEqual((1...7).map { ReconnectBackoff.bound(attempt: $0) }, [3, 4, 8, 16, 30, 30, 30].map { .seconds($0) })
        var backoff = ReconnectBackoff()
        XCTAssertEqual((0..<6).map { _ in backoff.next { 1 } }, [3, 4, 8, 16, 30, 30].map { .seconds($0) }, "the full bound at unit 1")
        backoff.reset()
        XCTAssertEqual(backoff.next { 0.5 }, .milliseconds(1_500), "attempt 1 again after a reset")
        XCTAssertEqual(backoff.next { 0 }, .zero, "full jitter reaches zero")
    }
}
