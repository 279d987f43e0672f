@testable import TetherSignal
import TetherWire
import XCTest
import TetherEncoding

final class ClusterMessageTests: XCTestCase {
    private let a = SignalingID(key: [UInt8](repeating: 0xA1, count: 32)), b = SignalingID(key: [UInt8](repeating: 0xB2, count: 32))
    private let call = CallUUID("6f1d2c3b-4a59-4e8d-9c7b-0a1b2c3d4e5f")!

    func testASignalCrossesBetweenNodesUnchangedAndAnOfflineBounceNamesBothIDs() throws {
        let signal = SignalMessage(kind: .offer, from: a, to: b, call: call, body: Base64.encode(Array("{}".utf8)),
                                   signature: [UInt8](repeating: 7, count: 64))
        let crossed = try XCTUnwrap(ClusterMessage.parse(Array(ClusterMessage.signal(signal).json.utf8)))
        XCTAssertEqual(crossed, .signal(signal))
        guard case let .signal(delivered) = crossed else { return XCTFail() }
        XCTAssertEqual(delivered.json(), signal.json(), "the recipient gets the sender's envelope byte for byte")

        let bounce = ClusterMessage.offline(sender: a, recipient: b, call: call, kind: .candidate)
        XCTAssertEqual(bounce.json, #"{"t":"offline","to":"\#(a.canonical)","from":"\#(b.canonical)","call":"\#(call.text)","kind":"candidate"}"#)
        XCTAssertEqual(ClusterMessage.parse(Array(bounce.json.utf8)), bounce)
    }

    func testAnythingElseFromAnotherNodeIsRefused() {
        for text in [#"{"t":"signal"}"#, #"{"t":"offline","to":"x"}"#, #"{"t":"hello"}"#, "[]", "not json",
                     #"{"t":"offline","to":"\#(a.canonical)","from":"\#(b.canonical)","call":"\#(call.text)","kind":"ring"}"#] {
            XCTAssertNil(ClusterMessage.parse(Array(text.utf8)), text)
        }
    }
}
