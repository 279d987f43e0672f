import Foundation
import TetherTestSupport
import XCTest

/// What a log pipeline reads from a service: under json every line is JSON, start-up included;
/// the level setting drops what weighs less; a failed TLS handshake is there at debug (the gate's
/// refusals too: ConnectionGateTests).
final class LogOutputEndToEndTests: XCTestCase {
    private func objects(_ text: String) throws -> [[String: String]] {
        try text.split(separator: "\n").map { line in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "not a JSON object: \(line)")
        }
    }

    func testUnderJSONEveryLineIsJSONTheStartUpNotesAndTheListeningLineIncluded() throws {
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--relay-port", "0", "--relay-db", ":memory:", "--relay-log-format", "json"],
                                         environment: ["RELAY_TRUST_PROXIE": "true"], expecting: "{", capturing: true)
        let first = try XCTUnwrap(try objects(process.firstLine).first)
        XCTAssertEqual(first["service"], "relay")
        XCTAssertEqual(first["level"], "info")
        XCTAssertTrue(first["msg"]?.hasPrefix("listening on 127.0.0.1:") == true, "\(first)")
        XCTAssertEqual(first["tls"], "off")
        XCTAssertEqual(first["db"], ":memory:")
        process.stop()
        let rest = try objects(process.capturedOutput)
        XCTAssertTrue(rest.contains { $0["level"] == "warning" && $0["msg"] == "warning: RELAY_TRUST_PROXIE is not a setting of tether relay; ignored (did you mean RELAY_TRUST_PROXY?)" }, "\(rest)")
        XCTAssertTrue(rest.contains { $0["msg"] == "shutting down" }, "\(rest)")
        XCTAssertFalse(rest.contains { $0["msg"]?.hasPrefix("relay: ") == true }, "the service is a field, not a prefix: \(rest)")
    }

    func testTheLogLevelDropsLighterLinesAndAnUnknownLevelStopsStartUp() throws {
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--relay-port", "0", "--relay-db", ":memory:", "--relay-log-level", "warning"],
                                         environment: ["RELAY_TRUST_PROXIE": "true"], expecting: "relay: listening on", capturing: true)
        process.stop()
        XCTAssertTrue(process.capturedOutput.contains("relay: warning: RELAY_TRUST_PROXIE"), process.capturedOutput)
        XCTAssertFalse(process.capturedOutput.contains("local mode:"), "an info note is below warning: \(process.capturedOutput)")
        XCTAssertFalse(process.capturedOutput.contains("shutting down"), process.capturedOutput)
        let refused = try TetherBinary.run(["relay", "--local", "--relay-db", ":memory:", "--relay-log-level", "verbose"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertEqual(refused.output, "tether: relay: RELAY_LOG_LEVEL: must be debug, info, warning or error: verbose\n")
    }

    func testAtDebugAFailedTLSHandshakeIsLoggedWithItsReasonAndNoAddress() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("log-debug-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (cert, key) = try TestCertificate.make(in: directory, commonName: "relay", days: 30)
        let process = try ServiceProcess(TetherBinary.url, ["relay", "--local", "--relay-port", "0", "--relay-db", ":memory:", "--relay-log-level", "debug",
                                                            "--tls-cert", cert, "--tls-key", key],
                                         expecting: "relay: listening on", capturing: true)
        defer { process.stop() }
        _ = try runProcess("/usr/bin/curl", ["-s", "--max-time", "5", "http://127.0.0.1:\(process.port)/healthz"])
        XCTAssertTrue(eventually("the handshake line") { process.capturedOutput.contains("relay: TLS handshake failed: ") }, process.capturedOutput)
        XCTAssertFalse(process.capturedOutput.contains("127.0.0.1 "), "no client address: \(process.capturedOutput)")
    }
}
