@testable import TetherSignal
import TetherWire
import XCTest

/// signaling.md §4 and §5.6: the close code that follows each closing `error`; its reason is the
/// code itself. `internal` has no wire path to trigger it (an unexpected fault), so the mapping is
/// pinned here.
final class SignalSocketTests: XCTestCase {
    func testEveryClosingErrorCodeMapsToItsCloseCode() {
        XCTAssertEqual(SignalSocket.closeCode(for: .internal), 1011)
        XCTAssertEqual(SignalSocket.closeCode(for: .unavailable), 1013)
        XCTAssertEqual(SignalSocket.closeCode(for: .tooLarge), 1009)
        for code in SignalingErrorCode.allCases where ![.internal, .unavailable, .tooLarge].contains(code) {
            XCTAssertEqual(SignalSocket.closeCode(for: code), 1008, code.rawValue)
        }
        XCTAssertEqual(SignalingErrorCode.internal.rawValue, "internal", "the 1011 close's reason")
    }
}
