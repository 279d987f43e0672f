import TetherTestSupport
import XCTest

/// `--relay-only` hides the device's address from the peer, so nothing Tether signals may name
/// it (Tests/Peers/relay_only_signals.py): `tether call` and `tether answer` gather on 127.0.0.2
/// and 127.0.0.3 while coturn and `tether signal` listen on 127.0.0.1, every byte each sends to
/// the server passes a recording proxy and is decoded down to the SDP lines and candidates, and
/// neither device address nor any local port of either process may appear, while the call is
/// secured through TURN. `detector` first shows the inspection catches libnice's related address.
final class RelayOnlyPrivacyEndToEndTests: XCTestCase {
    func testARelayOnlyCallSignalsNeitherTheDeviceAddressNorItsPortsAndStillConnectsThroughTURN() throws {
        let (status, output) = try ServiceProcess.runPeer("relay_only_signals.py", ["--tether", TetherBinary.url.path])
        let lines = output.split(separator: "\n")
        XCTAssertTrue(lines.contains("PASS detector"), output)
        XCTAssertTrue(lines.contains("PASS relay-only-signals"), output)
        for failure in lines where failure.hasPrefix("FAIL ") { XCTFail(String(failure)) }
        XCTAssertEqual(status, 0, output)
    }
}
