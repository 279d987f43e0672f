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

    /// Tests/Peers/hostile_caller.py against one `tether answer`: correctly signed offers whose
    /// SDP is malformed, malformed candidates, an offer whose a=fingerprint is not the caller's
    /// DTLS certificate (aiortc's media), bodies §7.2 drops. Each refused call ends with a
    /// reason naming its problem and `close` `error` to the caller, the process keeps waiting,
    /// and a real `tether call` after all of them is secured.
    func testTetherAnswerRefusesMalformedAndMismatchedCallsWithTheirReasonAndThenSecuresAGoodOne() throws {
        let (status, output) = try ServiceProcess.runPeer("hostile_caller.py", ["--tether", TetherBinary.url.path])
        let lines = output.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.hasPrefix("PASS ") }.count, 23, output)
        for name in ["sdp-no-fingerprint", "sdp-setup-active", "sdp-audio-not-application", "sdp-bad-ice-ufrag", "sdp-garbage",
                     "candidate-bad-port", "candidate-while-ringing", "ignored", "fingerprint", "good-call"] {
            XCTAssertTrue(lines.contains("PASS \(name)"), "\(name): \(output)")
        }
        // aiortc may warn on stderr; only the scenarios' verdicts count.
        for failure in lines where failure.hasPrefix("FAIL ") { XCTFail(String(failure)) }
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
