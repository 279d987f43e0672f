import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// The relay on the service chassis, driven from outside: the admin listener, signals, TLS on
/// every loop with a certificate that reloads, and the stall close of back-pressure.
extension RelayEndToEndTests {
    private func curl(_ url: String, _ extra: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess("/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "--max-time", "10"] + extra + [url])
    }

    func testTheAdminListenerServesMetricsLivenessAndReadinessOnLoopbackOnly() throws {
        tearDown()
        let admin = freePort()   // the admin port takes no 0
        try startRelay(database: ":memory:", ["--relay-admin-port", String(admin)])
        XCTAssertTrue(logLines().contains("relay: admin listener on 127.0.0.1:\(admin) (/metrics, /healthz, /readyz)"), "\(logLines())")
        XCTAssertEqual(try curl("http://127.0.0.1:\(admin)/healthz").stdout, "ok\n\n200")
        XCTAssertEqual(try curl("http://127.0.0.1:\(admin)/readyz").stdout, "ready\n\n200")
        let metrics = try curl("http://127.0.0.1:\(admin)/metrics").stdout
        XCTAssertTrue(metrics.contains("\nrelay_rooms_live 0\n"), metrics)
        XCTAssertTrue(metrics.contains("\nrelay_store_backlog 0\n"), metrics)
        XCTAssertTrue(metrics.contains("\nrelay_accept_backoffs_total 0\n"), metrics)
        XCTAssertTrue(metrics.hasSuffix("\n200"))
        XCTAssertEqual(try curl("http://127.0.0.1:\(admin)/metrics", ["-H", "X-Forwarded-For: 203.0.113.9"]).stdout, "forbidden\n403",
                       "a proxied request never reaches the counters")
        XCTAssertEqual(try curl("http://127.0.0.1:\(port)/readyz").stdout.suffix(3), "400", "the public port is unchanged: /readyz meets the room gate")
    }

    func testTheRelayKeepsRunningOnSIGUSR1AndSIGHUPWithoutTLS() throws {
        kill(process.processIdentifier, SIGUSR1)
        kill(process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the SIGHUP line") { logLines().contains("relay: SIGHUP: no TLS certificate to reload") }, "\(logLines())")
        XCTAssertTrue(process.isRunning)
        XCTAssertEqual(try client("pair")["phone_ok"] as? Bool, true)
    }

    func testSIGHUPReloadsTheTLSCertificateForNewConnectionsAndABadOneLeavesTheOldServing() throws {
        tearDown()
        let directory = try scratchDirectory()
        let cert = directory.appendingPathComponent("relay.crt").path, key = directory.appendingPathComponent("relay.key").path
        func make(_ name: String) throws { _ = try TestCertificate.make(in: directory, commonName: name) }
        func servedName() throws -> String {
            let shown = try runProcess("/usr/bin/curl", ["-skv", "--max-time", "10", "https://127.0.0.1:\(port)/healthz"])
            return shown.stderr.split(separator: "\n").first { $0.contains("subject: CN=") }.map { String($0.split(separator: "=").last ?? "") } ?? ""
        }
        try make("first")
        try startRelay(database: ":memory:", ["--tls-cert", cert, "--tls-key", key, "--relay-log-format", "timestamp"])
        XCTAssertEqual(try servedName(), "first")
        try make("second")
        kill(process.processIdentifier, SIGHUP)
        // Each at its own level, so alerting that watches warnings and errors sees them: the
        // reload is news, the day-old certificate's expiry a warning, a failed reload an error.
        XCTAssertTrue(eventually("the reload line") { logLines().contains { $0.hasSuffix(" info relay: TLS certificate reloaded (SIGHUP)") } }, "\(logLines())")
        XCTAssertTrue(logLines().contains { $0.contains(" warning relay: warning: the TLS certificate expires at ") }, "\(logLines())")
        XCTAssertEqual(try servedName(), "second")
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: cert))
        kill(process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the failed reload") { logLines().contains { $0.contains(" error relay: TLS certificate not reloaded, the current one stays: ") } }, "\(logLines())")
        XCTAssertEqual(try servedName(), "second")
        XCTAssertTrue(process.isRunning)
    }

    func testTheMetricsCarryTheProcessFiguresAndCountFailedTLSHandshakes() throws {
        tearDown()
        let directory = try scratchDirectory()
        let (cert, key) = try TestCertificate.make(in: directory, commonName: "relay")
        let admin = freePort()   // the admin port takes no 0
        try startRelay(database: ":memory:", ["--tls-cert", cert, "--tls-key", key, "--relay-admin-port", String(admin)])
        func sample(_ name: String) throws -> Double? {
            try curl("http://127.0.0.1:\(admin)/metrics").stdout.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
        }
        XCTAssertEqual(try sample("tether_tls_handshake_failures_total"), 0)
        // Plain HTTP at the TLS port, and a TLS 1.1-only client: two failed handshakes.
        _ = try curl("http://127.0.0.1:\(port)/healthz")
        _ = try runProcess("/bin/sh", ["-c", "openssl s_client -connect 127.0.0.1:\(port) -tls1_1 </dev/null >/dev/null 2>&1"])
        XCTAssertEqual(try sample("tether_tls_handshake_failures_total"), 2)
        XCTAssertEqual(try curl("https://127.0.0.1:\(port)/healthz", ["--cacert", cert]).stdout, "ok\n\n200", "a good handshake is not counted")
        XCTAssertEqual(try sample("tether_tls_handshake_failures_total"), 2)
        let rss = try XCTUnwrap(try sample("process_resident_memory_bytes"))
        XCTAssertGreaterThan(rss, 1_000_000)
        XCTAssertLessThan(rss, 2_000_000_000)
        XCTAssertGreaterThan(try sample("process_open_fds") ?? 0, 3)
        XCTAssertGreaterThanOrEqual(try sample("process_max_fds") ?? 0, 1024)
        let started = try XCTUnwrap(try sample("process_start_time_seconds"))
        XCTAssertLessThan(abs(started - Date().timeIntervalSince1970), 120)
        XCTAssertGreaterThan(try sample("process_cpu_seconds_total") ?? 0, 0)
        // The certificate was made for one day: its expiry, for alerting, is a day from now.
        let expiry = try XCTUnwrap(try sample("tether_tls_certificate_expiry_timestamp_seconds"))
        XCTAssertLessThan(abs(expiry - Date().timeIntervalSince1970 - 86_400), 600)
        XCTAssertEqual(try sample("tether_acme_issuances_total{outcome=\"failure\"}"), 0, "known outcomes are exposed from the start")
        XCTAssertEqual(try sample("tether_acme_issuances_total{outcome=\"success\"}"), 0)
        XCTAssertFalse(logLines().contains { $0.lowercased().contains("handshake") }, "a failed handshake is counted, not logged: \(logLines())")
    }

    func testAPhoneThatStopsReadingIsClosedWriteStalledAndItsMacStaysAdmitted() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-max-frames-per-sec", "0", "--relay-daily-byte-quota", "100000000000",
                                              "--relay-stall-timeout-ms", "1000"])
        setenv("FLOOD_SECONDS", "3", 1)
        defer { unsetenv("FLOOD_SECONDS") }
        let result = try client("flood", [String(process.processIdentifier)])
        XCTAssertEqual((result["mac"] as? [String: Any])?["ok"] as? Bool, true)
        let log = logLines()
        XCTAssertTrue(log.contains { $0.hasSuffix(" stalled role=phone") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains(" disconnect initiator=relay role=phone state=admitted code=1008 reason=write stalled ") }, "\(log)")
        XCTAssertFalse(log.contains { $0.contains(" disconnect initiator=relay role=mac ") }, "the mac is not closed for its phone's stall")
    }
}
