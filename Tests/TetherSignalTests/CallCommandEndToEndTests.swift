import TetherTestSupport
import XCTest

/// `tether call` and `tether answer` as two real processes, driven like a script through a real
/// `tether signal`, over the real WebRTC data channel (Tests/Peers/call_cli.py): consent, equal
/// safety numbers, chat both ways with receipts, rotation, hang-up; a declined call, a busy
/// callee, an offline one, each with its line and exit status; and a call relay-only on both
/// sides through a real coturn with the credentials that `tether signal` issued.
final class CallCommandEndToEndTests: XCTestCase {
    func testTwoTetherProcessesCallChatRotateAndHangUpAndADeclinedBusyOfflineOrRelayedCallSaysSo() throws {
        let (status, output) = try ServiceProcess.runPeer("call_cli.py", ["--tether", TetherBinary.url.path])
        let lines = output.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.hasPrefix("PASS ") }.count, 5, output)
        XCTAssertTrue(lines.contains("PASS relay"), output)
        for failure in lines where !failure.hasPrefix("PASS ") { XCTFail(String(failure)) }
        XCTAssertEqual(status, 0, output)
    }

    func testTetherDemoCallRunsAWholeCallNarratedAndExitsZero() throws {
        let (status, output) = try TetherBinary.run(["demo", "call"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("(equal)"), "both sides show the same safety number: \(output)")
        XCTAssertTrue(output.contains("Bob reads: Hello Bob, can you read this?"), output)
        XCTAssertTrue(output.contains("both now use epoch 1"), output)
        XCTAssertTrue(output.contains("9. Alice hung up; Bob's device says: the peer hung up."), output)
    }
}
