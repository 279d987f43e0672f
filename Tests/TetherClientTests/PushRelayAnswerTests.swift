@testable import TetherClient
import TetherWire
import XCTest
import TetherEncoding

/// How the SDK reads a push relay's refusals (push.md §2.7, §3.7): whatever number a relay puts
/// in `status`, reading it never traps.
final class PushRelayAnswerTests: XCTestCase {
    private func apnsStatus(_ json: String, error: String = "") -> Int? {
        PushRelayClient.apnsStatus(status: 502, json: JSONValue.parse(Array(json.utf8)), error: error)
    }

    func testAnAPNsStatusThatIsNoIntegerIsNoStatus() {
        XCTAssertEqual(apnsStatus(#"{"error":"apns rejected","status":400}"#), 400)
        XCTAssertNil(apnsStatus(#"{"status":1e300}"#), "beyond Int: before, Int(_:) trapped")
        XCTAssertNil(apnsStatus(#"{"status":1e999}"#), "infinity")
        XCTAssertNil(apnsStatus(#"{"status":400.5}"#))
        XCTAssertEqual(apnsStatus("not json", error: "APNs 410: gone"), 410, "Profile I's text form still reads")
    }
}
