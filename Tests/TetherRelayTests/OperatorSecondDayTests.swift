import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// Messages and signals an operator meets after the first day, on the real binary: each names
/// the thing at fault and the fix.
final class OperatorSecondDayTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("second-day-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    func testHelpForACommandInEitherOrderAndTheCommandListNamesDb() throws {
        let (status, output) = try TetherBinary.run(["help", "relay"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.hasPrefix("usage: tether relay"), output)
        XCTAssertTrue(output.contains("--check"), "the check is documented where the settings are: \(output)")
        let general = try TetherBinary.run(["--help"])
        XCTAssertTrue(general.output.contains("\n  db "), general.output)
    }

    /// The package's man page comes from the same tables as --help, so it lists every setting.
    func testTheManPageIsGeneratedFromTheSettingsTables() throws {
        let (status, page) = try TetherBinary.run(["--help-man"])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(page.hasPrefix(".TH TETHER 1 "), page)
        for name in ["RELAY_ORIGIN", "APNS_TOPIC", "SIGNAL_ALLOWED_ORIGINS", "RELAY_LOG_LEVEL"] {
            XCTAssertTrue(page.contains(name.replacingOccurrences(of: "-", with: "\\-")), "\(name) is on the page")
        }
        XCTAssertTrue(page.contains("\\fB\\-\\-relay\\-port\\fR"), "flags are literal hyphens in roff")
        XCTAssertFalse(page.split(separator: "\n").contains { $0.hasPrefix(".") && !$0.hasPrefix(".TH") && !$0.hasPrefix(".SH") && !$0.hasPrefix(".TP")
            && !$0.hasPrefix(".B") && !$0.hasPrefix(".I") && !$0.hasPrefix(".PP") }, "no text line reads as a roff request")
    }

    func testADatabaseURLOfAnotherKindIsNamedAsSuch() throws {
        let (status, output) = try TetherBinary.run(["relay", "--local", "--relay-db", "mysql://u@h/db"])
        XCTAssertEqual(status, 2, output)
        XCTAssertEqual(output, "tether: relay: RELAY_DB: mysql:// is not a database Tether can use: give a SQLite file path, a postgres:// URL or :memory:\n")
        let missing = try TetherBinary.run(["relay", "--local", "--relay-db", "/nonexistent/dir/relay.db"])
        XCTAssertEqual(missing.output, "tether: relay: RELAY_DB: no directory /nonexistent/dir for /nonexistent/dir/relay.db\n")
    }

    func testAnEmptyAPNsTopicStopsThePushRelayNamingIt() throws {
        let key = Vectors.packageRoot().appendingPathComponent("Package.swift").path
        let (status, output) = try TetherBinary.run(["push", "--check", "--push-db", ":memory:"], environment: [
            "APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890", "APNS_PRIVATE_KEY_FILE": key, "APNS_TOPIC": "",
        ])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("APNS_TOPIC: empty: needs the app's bundle id (remove the line to use the default)"), output)
    }

    func testSIGQUITStopsAServiceLikeSIGTERM() throws {
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--relay-db", ":memory:", "--relay-port", "0"],
                                         expecting: "relay: listening on", capturing: true)
        kill(process.process.processIdentifier, SIGQUIT)
        process.process.waitUntilExit()
        XCTAssertEqual(process.process.terminationReason, .exit, "it exits, not dumps core")
        XCTAssertEqual(process.process.terminationStatus, 0)
        XCTAssertTrue(eventually("the shutdown line", within: 5) { process.capturedOutput.contains("relay: shutting down") }, process.capturedOutput)
    }

    func testSIGHUPNamesASettingChangedInTheConfigFileAsWaitingForARestart() throws {
        let file = directory.appendingPathComponent("relay.env")
        try "RELAY_MAX_ROOMS=100\n".write(to: file, atomically: true, encoding: .utf8)
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--config", file.path, "--relay-db", ":memory:", "--relay-port", "0"],
                                         expecting: "relay: listening on", capturing: true)
        defer { process.stop() }
        try "RELAY_MAX_ROOMS=200\n".write(to: file, atomically: true, encoding: .utf8)
        kill(process.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the SIGHUP warning", within: 5) {
            process.capturedOutput.contains("relay: warning: SIGHUP: RELAY_MAX_ROOMS changed; it takes effect at the next restart (in place: the log level, verbose logging, the certificate files)")
        }, process.capturedOutput)
        try "RELAY_MAX_ROOM=200\n".write(to: file, atomically: true, encoding: .utf8)
        kill(process.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the SIGHUP problem", within: 5) {
            process.capturedOutput.contains("relay: warning: SIGHUP: RELAY_MAX_ROOM: not a setting of tether relay")
        }, process.capturedOutput)
    }

    func testSIGHUPAppliesTheLogLevelAndNewCertificatePathsInPlace() throws {
        let first = try TestCertificate.make(in: directory, name: "first", commonName: "first", days: 30)
        let second = try TestCertificate.make(in: directory, name: "second", commonName: "second", days: 30)
        let file = directory.appendingPathComponent("relay.env")
        func write(_ pair: (certificate: String, key: String), level: String) throws {
            try "RELAY_TLS_CERT=\(pair.certificate)\nRELAY_TLS_KEY=\(pair.key)\nRELAY_LOG_LEVEL=\(level)\n".write(to: file, atomically: true, encoding: .utf8)
        }
        try write(first, level: "info")
        let port = RelayProcess.freePort()
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--config", file.path, "--relay-db", ":memory:", "--relay-port", String(port)],
                                         expecting: "relay: listening on", capturing: true)
        defer { process.stop() }
        func servedName() throws -> String {
            let shown = try runProcess("/usr/bin/curl", ["-skv", "--max-time", "10", "https://127.0.0.1:\(port)/healthz"])
            return shown.stderr.split(separator: "\n").first { $0.contains("subject: CN=") }.map { String($0.split(separator: "=").last ?? "") } ?? ""
        }
        XCTAssertEqual(try servedName(), "first")
        _ = try runProcess("/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(port)/healthz"])

        try write(second, level: "debug")
        kill(process.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the reload", within: 5) { process.capturedOutput.contains("relay: TLS certificate reloaded (SIGHUP)") }, process.capturedOutput)
        XCTAssertFalse(process.capturedOutput.contains("relay: TLS handshake failed"), "not at info: \(process.capturedOutput)")
        XCTAssertTrue(process.capturedOutput.contains("relay: SIGHUP: RELAY_LOG_LEVEL is now debug"), process.capturedOutput)
        XCTAssertTrue(process.capturedOutput.contains("relay: SIGHUP: verbose logging on (RELAY_LOG)"), process.capturedOutput)
        XCTAssertFalse(process.capturedOutput.contains("changed; it takes effect at the next restart"), "all of it applied: \(process.capturedOutput)")
        XCTAssertEqual(try servedName(), "second", "the new paths serve without a restart")
        _ = try runProcess("/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(port)/healthz"])
        XCTAssertTrue(eventually("a debug line now", within: 5) { process.capturedOutput.contains("relay: TLS handshake failed") },
                      "debug lines follow the new level: \(process.capturedOutput)")

        kill(process.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the second reload", within: 5) {
            process.capturedOutput.components(separatedBy: "relay: TLS certificate reloaded (SIGHUP)").count == 3
        }, process.capturedOutput)
        XCTAssertFalse(process.capturedOutput.contains("changed; it takes effect at the next restart"),
                       "paths taken in place are in effect, not waiting, at the next SIGHUP too: \(process.capturedOutput)")

        let damaged = directory.appendingPathComponent("damaged.crt")
        try Data("not a certificate".utf8).write(to: damaged)
        try write((damaged.path, second.key), level: "debug")
        kill(process.process.processIdentifier, SIGHUP)
        XCTAssertTrue(eventually("the failed load", within: 5) { process.capturedOutput.contains("relay: TLS certificate not reloaded, the current one stays: ") }, process.capturedOutput)
        XCTAssertTrue(eventually("the path named as waiting", within: 5) {
            process.capturedOutput.contains("relay: warning: SIGHUP: RELAY_TLS_CERT changed; it takes effect at the next restart")
        }, process.capturedOutput)
        XCTAssertEqual(try servedName(), "second", "a pair that does not load leaves the one serving")
    }
}
