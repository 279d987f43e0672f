import Foundation
import TetherTestSupport
import XCTest

/// Issue 28: every command that takes a path accepts a bare relative name (`A`, no slash), read
/// from the working directory, and a bad path is one line naming the flag or setting and exit 2,
/// never a trap. `tether id --state A` died with SIGILL in Foundation's `deletingLastPathComponent`.
final class RelativePathCommandTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-relative-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try TetherBinary.run(arguments, environment: environment, in: directory)
    }

    private func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path) }

    /// Starts a service in the test's directory, reads its output until `marker`, stops it.
    private func serve(_ arguments: [String], environment: [String: String] = [:], until marker: String) throws -> String {
        let process = Process()
        process.executableURL = TetherBinary.url
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.runWithSignalsUnblocked()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        // A service that never prints the marker is stopped, which ends its output.
        DispatchQueue.global().asyncAfter(deadline: .now() + 20) { if process.isRunning { process.terminate() } }
        var seen = ""
        while !seen.contains(marker) {
            let line = output.fileHandleForReading.readFirstLine()
            if line.isEmpty { break }
            seen += line
        }
        return seen
    }

    private func makeCertificate() throws {
        let (status, _, err) = try runProcess("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-keyout", directory.appendingPathComponent("K").path, "-out", directory.appendingPathComponent("C").path,
        ])
        XCTAssertEqual(status, 0, err)
    }

    func testPeerCommandsTakeABareRelativeStateDirectory() throws {
        let id = try run(["id", "--state", "A"])
        XCTAssertEqual(id.status, 0, id.output)
        XCTAssertTrue(id.output.hasPrefix("Made a new calling identity in \(directory.resolvingSymlinksInPath().path)/A.")
            || id.output.hasPrefix("Made a new calling identity in \(directory.path)/A."), id.output)
        XCTAssertTrue(exists("A/call-identity"))
        XCTAssertEqual(try run(["id", "--state", "A"]).status, 0, "and reads it again")
        let unpair = try run(["unpair", "--state", "B"])
        XCTAssertEqual(unpair.status, 1)
        XCTAssertTrue(unpair.output.hasPrefix("tether: unpair: not paired"), unpair.output)
        XCTAssertEqual(try run(["phone", "--state", "B"]).status, 1, "not paired, and no trap")
        let attester = try run(["attester", "init", "Z"])
        XCTAssertEqual(attester.status, 0, attester.output)
        XCTAssertTrue(exists("Z/root.pem") && exists("Z/root-key.pem"))

        let relay = try RelayProcess()
        defer { relay.stop() }
        let mac = try serve(["mac", "--state", "M", "--relay", relay.origin], until: "iterm2://pair?")
        XCTAssertTrue(mac.contains("iterm2://pair?"), "the Mac shows its pairing link: \(mac)")
        XCTAssertTrue(exists("M"))
        let ownID = try XCTUnwrap(id.output.split(separator: "\n").first { $0.hasPrefix("ID: ") }?.dropFirst(4))
        let call = try run(["call", "--state", "A", "--signal", "ws://127.0.0.1:\(relay.port)/signal", String(ownID)])
        XCTAssertEqual(call.output, "tether: call: that is this device's own ID\n", "refused once the state loaded")
        XCTAssertEqual(call.status, 2)
    }

    func testABadStatePathIsOneLineAndExitTwo() throws {
        FileManager.default.createFile(atPath: directory.appendingPathComponent("F").path, contents: Data())
        for (state, message) in [("", "tether: id: --state needs a directory\n"),
                                 ("F", "tether: id: --state F: state directory: \(directory.path)/F is not a directory\n"),
                                 ("F/G", "tether: id: --state F/G: state directory: F is not a directory\n")] {
            let answer = try run(["id", "--state", state])
            XCTAssertEqual(answer.status, 2, state)
            XCTAssertEqual(answer.output.replacingOccurrences(of: directory.resolvingSymlinksInPath().path, with: directory.path), message)
        }
        let flagWithEquals = try run(["id", "--state="])
        XCTAssertEqual(flagWithEquals.status, 2, flagWithEquals.output)
        XCTAssertEqual(flagWithEquals.output, "tether: id: --state needs a directory\n")
        let attester = try run(["attester", "init", ""])
        XCTAssertEqual(attester.status, 2)
        XCTAssertEqual(attester.output, "tether: attester: init : state directory: no directory given\n")
    }

    func testServicesTakeBareRelativeFiles() throws {
        try makeCertificate()
        let relayPort = RelayProcess.freePort()   // a real port: the start line proves the config file E was read
        try "RELAY_PORT=\(relayPort)\n".write(to: directory.appendingPathComponent("E"), atomically: true, encoding: .utf8)
        let relay = try serve(["relay", "--local", "--config", "E", "--relay-db", "D", "--tls-cert", "C", "--tls-key", "K"], until: "relay: listening on")
        XCTAssertTrue(relay.contains("relay: listening on 127.0.0.1:\(relayPort) (db=D"), relay)
        XCTAssertTrue(exists("D"))
        let shown = try run(["shardmap", "show", "--relay-db", "D"])
        XCTAssertEqual(shown.status, 1, shown.output)
        XCTAssertTrue(shown.output.hasPrefix("tether: shardmap: no map published in D"), shown.output)

        let (status, _, err) = try runProcess("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                                    "-out", directory.appendingPathComponent("P").path])
        XCTAssertEqual(status, 0, err)
        let apns = ["APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890"]
        let push = try serve(["push", "--push-port", "0", "--push-db", "Q", "--apns-private-key-file", "P", "--apns-ca-file", "C",
                              "--tls-cert", "C", "--tls-key", "K"], environment: apns, until: "push: listening on")
        XCTAssertTrue(push.contains("push: listening on 127.0.0.1:"), push)
        XCTAssertTrue(exists("Q"))
        let signal = try serve(["signal", "--signal-port", "0", "--tls-cert", "C", "--tls-key", "K"], until: "signal: listening on")
        XCTAssertTrue(signal.contains("signal: listening on 127.0.0.1:"), signal)
    }

    func testABadServicePathIsOneLineNamingTheSettingAndExitTwo() throws {
        try makeCertificate()
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("Dir"), withIntermediateDirectories: true)
        let cases: [([String], String)] = [
            (["relay", "--local", "--relay-db", ""], "tether: relay: RELAY_DB: needs a SQLite file path, a postgres:// URL or :memory:\n"),
            (["relay", "--local", "--relay-db", "nodir/x.db"], "tether: relay: RELAY_DB: no directory nodir for nodir/x.db\n"),
            (["relay", "--local", "--relay-db", "Dir"], "tether: relay: RELAY_DB: Dir is a directory, not a database file\n"),
            (["relay", "--local", "--tls-cert", "nofile", "--tls-key", "K"], "tether: relay: RELAY_TLS_CERT: cannot read nofile: No such file or directory\n"),
            (["relay", "--local", "--tls-cert", "Dir", "--tls-key", "K"], "tether: relay: RELAY_TLS_CERT: Dir is a directory, not a file\n"),
            (["relay", "--local", "--config", "nofile"], "tether: relay: --config: cannot read the env-file nofile\n"),
            (["push", "--apns-private-key-file", "nofile"], "tether: push: APNS_PRIVATE_KEY_FILE: cannot read nofile: No such file or directory\n"),
            (["shardmap", "show", "--relay-db", ""], "tether: shardmap: --relay-db needs a path or a postgres:// URL\n"),
            (["shardmap", "show", "--relay-db", "A"], "tether: shardmap: no relay database at A (RELAY_DB / --relay-db; a relay creates it on its first start)\n"),
        ]
        for (arguments, message) in cases {
            let answer = try run(arguments, environment: ["APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890"])
            XCTAssertEqual(answer.status, 2, "\(arguments)")
            XCTAssertEqual(answer.output, message, "\(arguments)")
        }
        XCTAssertFalse(exists("A"), "nothing made for a refused path")
    }
}
