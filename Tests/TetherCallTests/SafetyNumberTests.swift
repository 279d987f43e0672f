import TetherCall
import TetherWire
import TetherSync
import XCTest

/// signaling.md §11 and its §12 vector.
final class SafetyNumberTests: XCTestCase {
    let alice = SignalingID(canonical: "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")!
    let bob = SignalingID(canonical: "4721B5B632272E65A68DDA7AC25B4185F8B01916DB185C14287DB92E2B770FAE")!

    func testTheVectorPairGivesTheSpecifiedNumberWhicheverSideComputesIt() {
        let expected = "87123 91341 61965 52377 79898 65120 99612 99002 60117 21426 28131 82440"
        XCTAssertEqual(SafetyNumber.of(alice, bob), expected)
        XCTAssertEqual(SafetyNumber.of(bob, alice), expected)
    }

    func testAnotherIDGivesAnotherNumber() {
        let carol = SignalingID(key: [UInt8](repeating: 0xC1, count: 32))
        XCTAssertNotEqual(SafetyNumber.of(alice, carol), SafetyNumber.of(alice, bob))
    }
}
