import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// The real `tether signal` binary driven over the wire by an independent client written from
/// signaling.md (Tests/Peers/signal_client.py: Python `websockets` + `cryptography`), against a
/// real coturn and a loopback stand-in of Cloudflare's TURN API.
final class SignalEndToEndTests: XCTestCase {
    /// `capturing`: the server's stdout and stderr are kept (`capturedOutput`), for the log checks.
    func signal(_ environment: [String: String] = [:], _ extra: [String] = [], capturing: Bool = false) throws -> ServiceProcess {
        try ServiceProcess(TetherBinary.url, ["signal", "--signal-port", "0"] + extra,
                           environment: environment, expecting: "signal: listening on", capturing: capturing)
    }

    /// Everything a capturing server wrote, once it has been stopped.
    func log(of server: ServiceProcess) -> String {
        server.stop()   // reads a capturing server's pipes to their end
        return server.capturedOutput
    }

    /// §6.4, §6.5: no ID (canonical or display form), call UUID or IPv4 address in `log`; the
    /// listening lines name the bind address, nothing else may.
    func assertNoIDCallOrAddress(in log: String, file: StaticString = #filePath, line: UInt = #line) {
        let quiet = log.split(separator: "\n").filter { !$0.contains("listening on") && !$0.contains("admin listener on") }.joined(separator: "\n")
        for (what, pattern) in [("an ID", "[0-9A-Fa-f]{64}"), ("a display ID", "CT2-[0-9A-F]{4}-"),
                                ("a call UUID", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
                                ("an IPv4 address", "\\b[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\b")] {
            XCTAssertNil(quiet.range(of: pattern, options: .regularExpression), "the log holds \(what): \(quiet.prefix(2000))", file: file, line: line)
        }
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

    /// §6.4, §6.5: behind a trusted proxy (SIGNAL_TRUST_PROXY=true, one hop) every scenario
    /// connection comes from its own `X-Forwarded-For` address (all from 127.0.0.1), so the
    /// per-IP limits hold per forwarded address and the others pass only if they key on it; with
    /// verbose logging on, through registrations, signals, refusals and limits, the log holds no
    /// ID, call UUID or address. (The quick scenarios only: the whole default set takes a minute.)
    func testBehindATrustedProxyTheLimitsKeyOnTheForwardedAddressAndNoneIsLogged() throws {
        let server = try signal(["SIGNAL_TRUST_PROXY": "true", "SIGNAL_LOG": "true"], ["--local"], capturing: true)
        let scenarios = ["limit-sockets", "limit-upgrades", "limit-order", "http-order", "register", "register-bad-signature", "duplicate-id",
                         "signal-forward", "signal-call", "signal-offline", "signal-bad-signature", "presence", "disconnect-presence", "too-large", "abuse"]
        try assertScenarios(["--url", url(server), "--spread", "xff"] + scenarios.flatMap { ["--scenario", $0] })
        assertNoIDCallOrAddress(in: log(of: server))
    }

    /// §4, §13.1: the server pings every 30 s; a client that answers stays, one that never
    /// answers is dropped by a TCP close without a close frame by ~60 s and is then offline.
    /// ~66 s, because the 30 s interval is fixed (it runs beside the rest under --parallel).
    func testTheServerPingsEvery30sAndDropsASocketThatNeverAnswersWithoutACloseFrame() throws {
        let server = try signal([:], ["--local"])
        try assertScenarios(["--url", url(server), "--scenario", "slow-keepalive"])
    }

    /// §4, §6.4, §13.1: SIGNAL_MAX_SOCKETS=4: the 5th upgrade from any IP is 503 `capacity`, a
    /// bad Origin is still 403 first, and once a socket closes a new one is accepted.
    func testAFullServerRefusesUpgrades503CapacityUntilASocketCloses() throws {
        let server = try signal(["SIGNAL_MAX_SOCKETS": "4"], ["--local"])
        try assertScenarios(["--url", url(server), "--max-sockets", "4", "--scenario", "capacity"])
    }

    /// §4, §13, §13.1: an Origin listed in SIGNAL_ALLOWED_ORIGINS upgrades and registers; only
    /// its exact bytes do: with a trailing slash, in upper case, sent twice, or another one is 403.
    func testAnAllowedOriginUpgradesAndOnlyItsExactValue() throws {
        let server = try signal(["SIGNAL_ALLOWED_ORIGINS": "https://app.example, https://other.example"], ["--local"])
        try assertScenarios(["--url", url(server), "--origin-allowed", "https://app.example", "--scenario", "origin-allowed"])
    }

    /// §13.1: none mode issues nothing and is not limited: 61 registrations in a minute and 9 at
    /// once are all `registered`.
    func testNoneModeRegistrationsAreNotIssuanceLimited() throws {
        let server = try signal([:], ["--local"])
        try assertScenarios(["--url", url(server), "--scenario", "issuance-unlimited"])
    }

    /// §13.1: metrics are on the loopback admin listener only: `GET /metrics` on the public port
    /// is 404 `not found`; on the admin port it is the Prometheus text of docs/metrics.md's signal
    /// families, and a forwarded request there is 403.
    func testMetricsAreServedOnTheAdminListenerOnly() throws {
        let admin = RelayProcess.freePort()   // the admin port takes no 0
        let server = try signal(["SIGNAL_ADMIN_PORT": String(admin)], ["--local"])
        func curl(_ url: String, _ extra: [String] = []) throws -> String {
            try TetherBinary.run(URL(fileURLWithPath: "/usr/bin/curl"),
                                 ["-s", "-w", "\n%{http_code} %{content_type}", "--max-time", "10"] + extra + [url]).output
        }
        XCTAssertEqual(try curl("http://127.0.0.1:\(server.port)/metrics"), "not found\n404 text/plain")
        // The admin listener starts after the public one.
        let metrics = try eventuallyValue("the admin listener answers", within: 5, poll: 0.05) { () throws -> String? in
            let answer = try curl("http://127.0.0.1:\(admin)/metrics")
            return answer.hasPrefix("\n000") ? nil : answer
        } ?? ""
        XCTAssertTrue(metrics.hasSuffix("\n200 text/plain; version=0.0.4"), String(metrics.suffix(200)))
        // The labelled families (refusals, signals, errors, issuances) show once they have a sample.
        for family in ["signal_upgrades_total counter", "signal_registrations_total counter", "signal_presence_queries_total counter",
                       "signal_issuance_latency_seconds histogram", "signal_sockets gauge", "signal_routable_ids gauge",
                       "signal_issuances_in_flight gauge", "signal_log_lines_dropped_total counter"] {
            XCTAssertTrue(metrics.contains("\n# TYPE \(family)\n"), "\(family) missing from the admin listener's /metrics")
        }
        XCTAssertEqual(try curl("http://127.0.0.1:\(admin)/metrics", ["-H", "X-Forwarded-For: 203.0.113.9"]), "forbidden\n403 text/plain")
    }

    /// §13.1: an unknown TURN_MODE, or coturn without TURN_SECRET, refuses to start: a non-zero
    /// exit before listening and one line on stderr naming the setting, with no secret in it.
    func testABadTURNModeRefusesToStartWithOneLineNamingTheSetting() throws {
        for (environment, setting) in [(["TURN_MODE": "twilio"], "TURN_MODE"),
                                       (["TURN_MODE": "coturn", "TURN_URLS": "turn:127.0.0.1:3478", "CLOUDFLARE_TURN_API_TOKEN": "tok-unused"], "TURN_SECRET"),
                                       (["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_KEY_ID": "kid", "CLOUDFLARE_TURN_API_TOKEN": "tok-secret",
                                         "CLOUDFLARE_CA_FILE": "/nonexistent/ca.pem"], "CLOUDFLARE_CA_FILE")] {
            let (status, output) = try TetherBinary.run(["signal", "--signal-port", "0"], environment: environment)
            XCTAssertNotEqual(status, 0, "\(environment)")
            let lines = output.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "one line for \(environment): \(output)")
            XCTAssertTrue(output.contains(setting), "the line names \(setting): \(output)")
            XCTAssertFalse(output.contains("listening"), output)
            XCTAssertFalse(output.contains("tok-"), "no secret in \(output)")
        }
    }

    /// Issue 29, §6.4: a socket floods messages that each earn an `error` (a `signal` before any
    /// registration) through a 4 KiB receive window and never reads. Its output is bounded (the
    /// server stops reading it), and once it has stayed above the mark for the 30 s stall it is
    /// closed 1008 `rate_limited`, the close frame after whole frames (before: 534 MB in 10 s,
    /// never closed, 2.9 million errors queued).
    func testErrorsNeverReadAreBoundedAndTheSocketIsClosedRateLimitedAtTheStall() throws {
        let server = try signal([:], ["--local"])
        let (status, output) = try ServiceProcess.runPeer("unread_flood.py", [
            "127.0.0.1", String(server.port), "/signal", "-", String(server.process.processIdentifier), "signal-error", "33",
        ])
        XCTAssertEqual(status, 0, output)
        let result = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], output)
        let growth = (result["rss_max_kb"] as? Int ?? .max) - (result["rss_start_kb"] as? Int ?? 0)
        XCTAssertLessThan(growth, 4 * 1024, "kB: \(result)")
        XCTAssertEqual(result["close"] as? [AnyHashable], [1008, "rate_limited"], "\(result)")
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

    /// One stand-in and one server per Cloudflare behaviour. `trustingItsCA: false` leaves out
    /// CLOUDFLARE_CA_FILE; `capturing` hands the server's output to `check` after the run.
    func cloudflare(_ mode: String, scenarios: [String], standIn extraStandIn: [String] = [], trustingItsCA: Bool = true,
                    environment extraEnvironment: [String: String] = [:], client extraClient: [String] = [],
                    capturing check: ((String) -> Void)? = nil) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-cf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let ca = directory.appendingPathComponent("ca.pem").path, record = directory.appendingPathComponent("requests.jsonl").path
        let standIn = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("cloudflare_standin.py"), "--token", "tok-e2e", "--key-id", "kid-e2e",
                                                                 "--ca-out", ca, "--record", record, "--mode", mode] + extraStandIn,
                                         expecting: "listening on")
        var environment = ["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_KEY_ID": "kid-e2e", "CLOUDFLARE_TURN_API_TOKEN": "tok-e2e",
                           "CLOUDFLARE_TURN_API_URL": "https://127.0.0.1:\(standIn.port)"]
        if trustingItsCA { environment["CLOUDFLARE_CA_FILE"] = ca }
        let server = try signal(environment.merging(extraEnvironment) { _, new in new }, capturing: check != nil)
        try withExtendedLifetime(standIn) {
            try assertScenarios(["--url", url(server), "--turn-mode", "cloudflare", "--cloudflare-mode", mode, "--cloudflare-record", record]
                                + extraClient + scenarios.flatMap { ["--scenario", $0] })
        }
        check?(log(of: server))
    }

    func testCloudflareCredentialsAreFetchedFilteredAndSplit() throws {
        try cloudflare("ok", scenarios: ["register"])
        try cloudflare("single-object", scenarios: ["register"])
        try cloudflare("foreign-hosts", scenarios: ["register"])
        try cloudflare("ok-200", scenarios: ["register"])
    }

    /// §13: the API token is never logged and never returned: with verbose logging, through a
    /// registration and a failed issuance (which logs its failure), neither the server's output
    /// nor any message a client gets contains it.
    func testTheCloudflareTokenNeverAppearsInTheLogOrOnTheWire() throws {
        for mode in ["ok", "error"] {
            try cloudflare(mode, scenarios: [mode == "ok" ? "register" : "issuance-unavailable"], environment: ["SIGNAL_LOG": "true"],
                           client: ["--forbid", "tok-e2e"]) { log in
                XCTAssertFalse(log.contains("tok-e2e"), log)
                XCTAssertFalse(log.contains("kid-e2e"), log)
                if mode == "error" { XCTAssertTrue(log.contains("credential issuance failed"), "the failure was logged: \(log)") }
                self.assertNoIDCallOrAddress(in: log)
            }
        }
    }

    /// §13: CLOUDFLARE_CA_FILE adds a root; without it the stand-in's private CA is not trusted
    /// (verification is never skipped) and issuance is `unavailable`, close 1013.
    func testWithoutItsCAFileTheStandInIsNotTrustedAndIssuanceIsUnavailable() throws {
        try cloudflare("ok", scenarios: ["issuance-unavailable"], trustingItsCA: false)
    }

    /// §6.1 steps 6 and 8: a pending ID is reserved but not routable (presence false, signals to
    /// it `offline`); a completion that arrives after its connection closed restores nothing.
    func testAPendingIDIsUnroutableAndAStaleCompletionCannotRestorePresence() throws {
        try cloudflare("slow", scenarios: ["issuance-unroutable", "issuance-stale"], standIn: ["--delay", "2"])
    }

    /// §8.3: the upstream request is cancelled when the registering connection closes.
    func testClosingAPendingRegistrationCancelsTheCloudflareRequest() throws {
        try cloudflare("slow", scenarios: ["issuance-cancel"])
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
