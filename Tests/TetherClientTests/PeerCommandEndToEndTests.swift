import Foundation
import TetherTestSupport
import XCTest

/// `tether mac`, `tether phone` and `tether unpair` driven as a script and as a person would
/// drive them (Tests/Peers/peer_cli.py, Tests/Peers/peer_tmux.py), each scenario over real
/// `tether relay` processes on loopback.
final class PeerCommandEndToEndTests: XCTestCase {
    private func run(_ script: String, _ arguments: [String], expect pass: String, timeout: TimeInterval = 180,
                     file: StaticString = #filePath, line: UInt = #line) throws {
        let binary = TetherBinary.url.path
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw XCTSkip("build the tether product first (make test does)") }
        let result = try PythonPeer.run(script: script, arguments: [binary] + arguments, timeout: timeout)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let verdict = lines.first { $0.hasPrefix("PASS ") || $0.hasPrefix("FAIL ") } ?? "(no verdict)"
        XCTAssertEqual(result.status, 0, "\(verdict)\n--- transcript ---\n\(result.stdout.suffix(6000))\n\(result.stderr.suffix(2000))", file: file, line: line)
        XCTAssertEqual(verdict, pass, file: file, line: line)
    }

    private func scenario(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try run("peer_cli.py", [name], expect: "PASS \(name)", file: file, line: line)
    }

    /// Pairing, chat both ways (100,000-byte line too), owner-only state, signed reconnect after
    /// restarting either side, lines held while the other side is away.
    func testFirstPairingThenReconnectAfterRestartingEitherSide() throws { try scenario("pair") }

    /// Three wrong codes: the phone hears "declined", the Mac makes a new pid; the old link is dead.
    func testThreeWrongCodesDeclineAndMakeANewPairingID() throws { try scenario("wrongcode") }

    /// Ctrl-C on a connected Mac: a close frame, exit 0, no re-join (issue 16 item 6).
    func testAnInterruptedMacClosesItsSocketAndDoesNotRejoin() throws { try scenario("interrupt") }

    /// An unused link expires and regenerates (lifetime shortened for the test).
    func testAnUnusedPairingLinkExpiresAndRegenerates() throws { try scenario("expiry") }

    func testARelayRestartMidSessionReconnectsBothSides() throws { try scenario("relayrestart") }

    /// A newer phone displaces the older one, which backs off 60 s.
    func testANewerPhoneDisplacesTheOlderOne() throws { try scenario("displace") }

    /// `tether unpair`: the room is deleted, both running peers stop, state is wiped.
    func testUnpairDeletesTheRoomAndStopsBothSides() throws { try scenario("unpair") }

    /// Attestation mode with the software attester and a test root over TLS; phones without an
    /// attester or with another root are refused; after unpair a rejoin is refused.
    func testAttestationModePairsWithTheSoftwareAttester() throws { try scenario("attested") }

    /// v2 links: the shard map finds the relay, and a reshard (4421) moves both sides.
    func testResolverLinksFollowTheShardMapThroughAReshard() throws { try scenario("resolver") }

    /// A relay that alters one spliced frame: AEAD failure, teardown, fresh handshake.
    func testATamperedFrameTearsTheChannelDownAndReHandshakes() throws { try scenario("tamper") }

    /// `tether mac`/`tether phone` against three relay nodes on PostgreSQL: the room's owner is
    /// killed with -9 mid-session and both sides chat on through the node that took its buckets.
    func testAMacAndPhoneChatOnThroughAClusterWhoseOwnerNodeIsKilled() throws {
        guard PostgresServer.isInstalled else { throw XCTSkip("PostgreSQL is not installed (scripts/install-deps)") }
        let server = try PostgresServer()
        defer { server.shutdown() }
        setenv("TETHER_TEST_PG", try server.createDatabase(), 1)
        defer { unsetenv("TETHER_TEST_PG") }
        try scenario("cluster")
    }

    /// Real terminals under tmux: the QR code decodes to the link, the code typed on the Mac pairs.
    func testInATerminalTheQRCodeDecodesAndTheTypedCodePairs() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), FileManager.default.isExecutableFile(atPath: "/usr/bin/zbarimg") else {
            throw XCTSkip("tmux and zbarimg are needed (scripts/install-deps installs them)")
        }
        try run("peer_tmux.py", [], expect: "PASS tmux", timeout: 120)
    }

    /// `tether demo`: one command, narrated, through every step, leaving nothing behind.
    func testTheDemoNarratesPairingChatRejoinAndUnpair() throws {
        let binary = TetherBinary.url.path
        let result = try runProcess(binary, ["demo"], timeout: 120)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        for expected in ["1. Started a private relay at http://127.0.0.1:", "The phone shows: ", "the demo types ",
                         "phone → Mac: Hello from the phone!", "Mac → phone: Hello back from the Mac.",
                         "no code this time", "phone → Mac: Still here after a restart.", "The phone unpaired", "9. Done."] {
            XCTAssertTrue(result.stdout.contains(expected), "missing \(expected) in:\n\(result.stdout)")
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()).filter { $0.hasPrefix("tether-demo-") }
        XCTAssertTrue(leftovers.allSatisfy { !FileManager.default.fileExists(atPath: NSTemporaryDirectory() + "/" + $0 + "/relay.db") })
    }
}
