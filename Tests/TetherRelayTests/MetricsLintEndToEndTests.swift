import Foundation
import TetherTestSupport
import XCTest

/// Every service's `/metrics`, as Prometheus' own linter reads it (`promtool check metrics`,
/// Debian's `prometheus` package), and the series an alert rule needs from the start.
final class MetricsLintEndToEndTests: XCTestCase {
    private static let promtool = "/usr/bin/promtool"

    private func scrape(_ arguments: [String], environment: [String: String] = [:], admin: UInt16, expecting prefix: String) throws -> String {
        let service = try ServiceProcess(TetherBinary.url, arguments + ["--\(prefix)-admin-port", String(admin)], environment: environment,
                                         expecting: "\(prefix): listening on")
        defer { service.stop() }
        let scraped = try runProcess("/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(admin)/metrics"])
        XCTAssertEqual(scraped.status, 0, scraped.stderr)
        return scraped.stdout
    }

    private func lint(_ exposition: String, _ service: String) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try exposition.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let checked = try runProcess("/bin/sh", ["-c", "\(Self.promtool) check metrics < \(file.path)"])
        XCTAssertEqual(checked.status, 0, "\(service): \(checked.stdout)\(checked.stderr)")
        XCTAssertEqual(checked.stdout + checked.stderr, "", "\(service): promtool has nothing to say")
    }

    func testEveryServicesMetricsPassPromtoolAndCarryTheSeriesAlertsNeed() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.promtool) else { throw XCTSkip("promtool is not installed (scripts/install-deps: prometheus)") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-lint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("AuthKey.p8").path
        let made = try runProcess("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        XCTAssertEqual(made.status, 0, made.stderr)

        let relay = try scrape(["relay", "--local", "--relay-port", "0", "--relay-db", ":memory:"], admin: RelayProcess.freePort(), expecting: "relay")
        let push = try scrape(["push", "--push-port", "0", "--push-db", ":memory:"],
                              environment: ["APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890", "APNS_PRIVATE_KEY_FILE": key],
                              admin: RelayProcess.freePort(), expecting: "push")
        let signal = try scrape(["signal", "--local", "--signal-port", "0"], admin: RelayProcess.freePort(), expecting: "signal")
        for (service, exposition) in [("relay", relay), ("push", push), ("signal", signal)] {
            try lint(exposition, service)
            for series in ["process_cpu_seconds_total ", "tether_tls_certificate_expiry_timestamp_seconds 0", "tether_acme_issuances_total{outcome=\"failure\"} 0"] {
                XCTAssertTrue(exposition.contains("\n" + series), "\(service) lacks \(series)")
            }
        }
        // Known label values are there at 0 before anything happened (the relay's rejections
        // keep the reference's appear-on-first-use, relay.md §2.10).
        XCTAssertTrue(push.contains("\npushrelay_apns_outcomes_total{reason=\"unreachable\"} 0\n"), push)
        XCTAssertTrue(signal.contains("\nsignal_errors_total{code=\"rate_limited\"} 0\n"), signal)
        XCTAssertTrue(signal.contains("\nsignal_upgrades_refused_total{reason=\"origin\"} 0\n"), signal)
    }
}
