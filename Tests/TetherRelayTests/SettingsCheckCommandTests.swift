import Foundation
import TetherTestSupport
import XCTest

/// An operator's second day on the real binary: a typo in a config file stops the service and
/// names the setting meant, a look-alike variable in the environment is warned about, every
/// switch takes exactly true or false, and `--check` says what is in effect and from where.
final class SettingsCheckCommandTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("settings-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    private func configFile(_ text: String) throws -> String {
        let url = directory.appendingPathComponent("service.env")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    func testATypoInTheConfigFileStopsTheRelayNamingTheSettingMeant() throws {
        let file = try configFile("RELAY_ORIGIN=https://relay.example.com\nRELAY_TLS_CRT=/etc/tls/relay.crt\nATTEST_REQUIRED=false\n")
        for extra in [[], ["--check"]] {
            let (status, output) = try TetherBinary.run(["relay", "--config", file, "--relay-db", ":memory:", "--relay-port", "0"] + extra)
            XCTAssertEqual(status, 2, output)
            XCTAssertTrue(output.contains("relay: RELAY_TLS_CRT: not a setting of tether relay (in \(file)) (did you mean RELAY_TLS_CERT?); see --help"), output)
            XCTAssertFalse(output.contains("listening on"), "no plaintext relay where TLS was meant: \(output)")
        }
    }

    func testALookAlikeVariableInTheEnvironmentIsWarnedAboutAndFailsTheCheck() throws {
        let environment = ["RELAY_TRUST_PROXIE": "true", "REALY_PORT": "9000"]
        let (status, output) = try TetherBinary.run(["relay", "--check", "--local", "--relay-db", ":memory:"], environment: environment)
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("relay: warning: RELAY_TRUST_PROXIE is not a setting of tether relay; ignored (did you mean RELAY_TRUST_PROXY?)"), output)
        XCTAssertTrue(output.contains("relay: warning: REALY_PORT is not a setting of tether relay; ignored (did you mean RELAY_PORT?)"), output)
    }

    func testEverySwitchOfEveryServiceTakesExactlyTrueOrFalse() throws {
        let push = ["APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890", "APNS_TOPIC": "com.example.app",
                    "APNS_PRIVATE_KEY_FILE": Vectors.packageRoot().appendingPathComponent("Package.swift").path]
        let cases: [(command: [String], environment: [String: String], variable: String)] = [
            (["relay", "--local", "--relay-db", ":memory:"], ["RELAY_PUBLIC_METRICS": "no"], "RELAY_PUBLIC_METRICS"),
            (["relay", "--local", "--relay-db", ":memory:"], ["RELAY_PUBLIC_METRICS": "0"], "RELAY_PUBLIC_METRICS"),
            (["relay", "--local", "--relay-db", ":memory:"], ["RELAY_PUBLIC_METRICS": "off"], "RELAY_PUBLIC_METRICS"),
            (["relay", "--local", "--relay-db", ":memory:"], ["RELAY_PUBLIC_METRICS": "FALSE"], "RELAY_PUBLIC_METRICS"),
            (["relay", "--local", "--relay-db", ":memory:"], ["RELAY_TRUST_PROXY": "yes"], "RELAY_TRUST_PROXY"),
            (["push", "--push-db", ":memory:"], push.merging(["PUSH_TRUST_PROXY": "1"]) { $1 }, "PUSH_TRUST_PROXY"),
            (["signal", "--local"], ["SIGNAL_LOG": "on"], "SIGNAL_LOG"),
        ]
        for (command, environment, variable) in cases {
            let (status, output) = try TetherBinary.run(command + ["--check"], environment: environment)
            XCTAssertEqual(status, 2, "\(environment): \(output)")
            XCTAssertTrue(output.contains("\(variable): must be true or false"), "\(environment): \(output)")
        }
    }

    func testAdviceAboutAValidDeploymentIsPrintedButPassesTheCheck() throws {
        // The packaged env-files run behind a local proxy on loopback: the check must pass them.
        let (status, output) = try TetherBinary.run(["relay", "--check", "--relay-db", ":memory:"],
                                                    environment: ["RELAY_ORIGIN": "https://relay.example.com", "ATTEST_REQUIRED": "false"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("relay: warning: bound to loopback without RELAY_TRUST_PROXY"), output)
        XCTAssertTrue(output.hasSuffix("relay: settings ok (1 warning above)\n"), output)
    }

    func testTheCheckListsEverySettingInEffectWithWhereItCameFromAndHidesSecrets() throws {
        let file = try configFile("RELAY_KEEPALIVE_MS=20000\nRELAY_METRICS_PUSH_TOKEN=s3cret-token\nRELAY_METRICS_PUSH_URL=https://user:hunter2@metrics.example/push\n")
        let (status, output) = try TetherBinary.run(["relay", "--check", "--config", file, "--local", "--relay-db", ":memory:"],
                                                    environment: ["RELAY_LOG": "true"])
        XCTAssertEqual(status, 0, output)
        let lines = output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
        XCTAssertTrue(lines.contains("RELAY_LOG true [env]"), output)
        XCTAssertTrue(lines.contains("RELAY_DB :memory: [flag]"), output)
        XCTAssertTrue(lines.contains("RELAY_KEEPALIVE_MS 20000 [file \(file)]"), output)
        XCTAssertTrue(lines.contains("RELAY_METRICS_PUSH_TOKEN (set) [file \(file)]"), output)
        XCTAssertTrue(lines.contains("RELAY_METRICS_PUSH_URL https://user:***@metrics.example/push [file \(file)]"), output)
        XCTAssertTrue(lines.contains("RELAY_MAX_ROOMS 200000 [default]"), output)
        XCTAssertFalse(output.contains("s3cret-token") || output.contains("hunter2"), output)
        XCTAssertTrue(output.hasSuffix("relay: settings ok\n"), output)
    }

    func testTheStartLineSaysTLSAndTheAdminPortAndBracketsIPv6() throws {
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--relay-port", "0", "--relay-host", "::1", "--relay-db", ":memory:"],
                                         expecting: "relay: listening on")
        defer { process.stop() }
        XCTAssertTrue(process.firstLine.hasPrefix("relay: listening on [::1]:\(process.port) (db=:memory:, attest=false, tls=off, admin=off) tether "),
                      process.firstLine)
    }
}
