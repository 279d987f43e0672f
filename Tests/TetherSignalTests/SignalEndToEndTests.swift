import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// The real `tether signal` binary driven over the wire by an independent client written from
/// signaling.md (Tests/Peers/signal_client.py: Python `websockets` + `cryptography`), against a
/// real coturn and a loopback stand-in of Cloudflare's TURN API.
final class SignalEndToEndTests: XCTestCase {
    func signal(_ environment: [String: String] = [:], _ extra: [String] = []) throws -> ServiceProcess {
        try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", String(RelayProcess.freePort())] + extra,
                           environment: environment, expecting: "signal: listening on")
    }

    func url(_ server: ServiceProcess) -> String { "ws://127.0.0.1:\(server.port)/signal" }

    /// Every line of the client's run is `PASS <scenario>`, and it exits 0.
    func assertScenarios(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let (status, output) = try ServiceProcess.runPeer("signal_client.py", arguments)
        let lines = output.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty, "the client ran scenarios", file: file, line: line)
        for failure in lines where !failure.hasPrefix("PASS ") { XCTFail(String(failure), file: file, line: line) }
        XCTAssertEqual(status, 0, output, file: file, line: line)
    }

    func testEveryMessageErrorCloseAndLimitAsTheIndependentClientSeesThem() throws {
        let server = try signal([:], ["--local"])
        try assertScenarios(["--url", url(server), "--scenario", "default"])
    }

    func testSIGTERMClosesEverySocket1001ShuttingDownAndExitsZero() throws {
        let server = try signal([:], ["--local"])
        try assertScenarios(["--url", url(server), "--server-pid", String(server.process.processIdentifier), "--scenario", "shutdown"])
        server.process.waitUntilExit()
        XCTAssertEqual(server.process.terminationStatus, 0)
    }

    func testCoturnCredentialsAllocateOnARealCoturnAndATamperedOneDoesNot() throws {
        let secret = "tether-e2e-" + UUID().uuidString
        let coturn = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("coturn_fixture.py"), "serve", "--secret", secret],
                                        expecting: "listening on")
        let urls = "turn:127.0.0.1:\(coturn.port)?transport=udp,turn:127.0.0.1:\(coturn.port)?transport=tcp"
        let server = try signal(["TURN_MODE": "coturn", "TURN_SECRET": secret, "TURN_URLS": urls, "STUN_URLS": "stun:127.0.0.1:\(coturn.port)"])
        try withExtendedLifetime(coturn) {
            try assertScenarios(["--url", url(server), "--turn-mode", "coturn", "--turn-secret", secret, "--turn-urls", urls,
                                 "--stun-urls", "stun:127.0.0.1:\(coturn.port)", "--coturn-port", String(coturn.port),
                                 "--scenario", "register", "--scenario", "coturn-allocate"])
        }
    }

    /// §8.1: 60 issuances per minute per process, counted when they start.
    func testTheSixtyFirstIssuanceInAMinuteIsUnavailable() throws {
        let server = try signal(["TURN_MODE": "coturn", "TURN_SECRET": "s", "TURN_URLS": "turn:127.0.0.1:3478?transport=udp"])
        try assertScenarios(["--url", url(server), "--turn-mode", "coturn", "--turn-secret", "s", "--scenario", "issuance-rate"])
    }

    /// One stand-in and one server per Cloudflare behaviour.
    func cloudflare(_ mode: String, scenarios: [String]) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-cf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let ca = directory.appendingPathComponent("ca.pem").path, record = directory.appendingPathComponent("requests.jsonl").path
        let standIn = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("cloudflare_standin.py"), "--token", "tok-e2e", "--key-id", "kid-e2e",
                                                                 "--ca-out", ca, "--record", record, "--mode", mode],
                                         expecting: "listening on")
        let server = try signal(["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_KEY_ID": "kid-e2e", "CLOUDFLARE_TURN_API_TOKEN": "tok-e2e",
                                 "CLOUDFLARE_TURN_API_URL": "https://127.0.0.1:\(standIn.port)", "CLOUDFLARE_CA_FILE": ca])
        try withExtendedLifetime(standIn) {
            try assertScenarios(["--url", url(server), "--turn-mode", "cloudflare", "--cloudflare-mode", mode, "--cloudflare-record", record]
                                + scenarios.flatMap { ["--scenario", $0] })
        }
    }

    func testCloudflareCredentialsAreFetchedFilteredAndSplit() throws {
        try cloudflare("ok", scenarios: ["register"])
        try cloudflare("single-object", scenarios: ["register"])
        try cloudflare("foreign-hosts", scenarios: ["register"])
    }

    func testAFailingCloudflareAnswerIsUnavailableAndReleasesTheID() throws {
        for mode in ["redirect", "oversize", "error", "bad-json", "no-turn"] {
            try cloudflare(mode, scenarios: ["issuance-unavailable"])
        }
    }

    func testAPendingIssuanceReservesTheIDAndTimesOutAfterEightSeconds() throws {
        try cloudflare("slow", scenarios: ["issuance-pending", "issuance-unavailable"])
    }

    /// §8.1: at most 8 issuances at once; the 9th fails at once.
    func testTheNinthConcurrentIssuanceIsUnavailable() throws {
        try cloudflare("slow", scenarios: ["issuance-concurrency"])
    }
}
