import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// The relay obtains its certificate over ACME (RFC 8555) from Debian's `pebble` on loopback,
/// proves HTTP-01 on its challenge listener, serves what it got (checked against pebble's root
/// for the domain), keeps it across a restart, and renews it in-process while a connection that
/// was open before the renewal stays open.
extension RelayEndToEndTests {
    private static let domain = "relay.tether.test"

    /// The serial of the certificate the relay serves to a new connection for `domain`.
    private func servedSerial() throws -> String {
        let result = try runProcess("/bin/sh", ["-c", "openssl s_client -connect 127.0.0.1:\(port) -servername \(Self.domain) </dev/null 2>/dev/null | openssl x509 -noout -serial"])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
    }

    private func waitForLog(_ predicate: (String) -> Bool, after count: Int = 0, within seconds: Double) -> String? {
        Eventually.poll(within: seconds, every: 0.05) { logLines().dropFirst(count).first(where: predicate) }.0
    }

    private func installed(_ line: String) -> Bool { line.hasPrefix("relay: ACME certificate for \(Self.domain) installed (") && line.contains("), valid until ") }

    func testTheRelayObtainsItsCertificateOverACMEKeepsItAcrossARestartAndRenewsItWithoutDroppingAConnection() throws {
        guard PebbleServer.isInstalled else { throw XCTSkip("pebble is not installed (scripts/install-deps)") }
        // Short-lived certificates: renewal comes after two thirds of 30 s.
        let pebble = try PebbleServer(validitySeconds: 30)
        defer { pebble.shutdown() }
        let state = try scratchDirectory().appendingPathComponent("acme")
        let arguments = ["--acme-domain", Self.domain, "--acme-email", "ops@tether.test", "--relay-acme-directory", pebble.directoryURL,
                         "--relay-acme-ca-file", pebble.caFile, "--relay-acme-dir", state.path, "--relay-acme-http-port", String(pebble.httpPort)]
        tearDown()
        try startRelay(database: ":memory:", arguments)
        let issued = waitForLog(installed, within: 30)
        XCTAssertNotNil(issued, "\(logLines())\n\(pebble.log.suffix(2000))")
        XCTAssertTrue(issued?.contains(" installed (http-01), ") == true, issued ?? "")
        let firstSerial = try servedSerial()

        // What it serves is pebble's, for the domain: curl verifies the chain and the name.
        let root = try scratchDirectory().appendingPathComponent("pebble-root.pem")
        try pebble.rootPEM().write(to: root, atomically: true, encoding: .utf8)
        let verified = try runProcess("/usr/bin/curl", ["-s", "--resolve", "\(Self.domain):\(port):127.0.0.1", "--cacert", root.path,
                                                        "https://\(Self.domain):\(port)/healthz"])
        XCTAssertEqual(verified.stdout, "ok\n", verified.stderr)
        for name in ["account.key", "\(Self.domain).key", "\(Self.domain).crt"] {
            let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: state.appendingPathComponent(name).path)[.posixPermissions] as? Int)
            XCTAssertEqual(mode, 0o600, name)
        }
        XCTAssertFalse(logLines().joined().contains("BEGIN"), "no key or certificate text in the log")

        // A restart serves the kept certificate and issues nothing.
        process.interrupt()
        process.waitUntilExit()
        try startRelay(database: ":memory:", arguments)
        XCTAssertEqual(try servedSerial(), firstSerial, "the kept certificate")

        // Renewal while a Mac is parked over TLS: it stays open, new connections get the new one.
        let parked = try PythonProcess(script: "relay_client.py", arguments: ["wss://\(Self.domain):\(port)/", "tls_park", root.path, Self.domain], timeout: 90)
        let first = parked.output.fileHandleForReading.readFirstLine()
        XCTAssertTrue(first.contains(#""parked": true"#) && first.contains(firstSerial), first)
        let renewed = waitForLog(installed, within: 40)
        XCTAssertNotNil(renewed, "renewed in-process: \(logLines())")
        XCTAssertNotEqual(try servedSerial(), firstSerial, "new connections get the renewed certificate")
        try parked.input.fileHandleForWriting.close()
        let last = parked.output.fileHandleForReading.readFirstLine()
        XCTAssertEqual(last.trimmingCharacters(in: .whitespacesAndNewlines), #"{"still_open": true}"#, "the connection from before the renewal")
        XCTAssertTrue(process.isRunning)
    }

    func testWithNoHTTPListenerTheRelayProvesTLSALPN01OnItsOwnPort() throws {
        guard PebbleServer.isInstalled else { throw XCTSkip("pebble is not installed (scripts/install-deps)") }
        let relayPort = freePort()   // known before start: pebble validates tls-alpn-01 on it
        let pebble = try PebbleServer(tlsPort: relayPort)
        defer { pebble.shutdown() }
        let state = try scratchDirectory().appendingPathComponent("acme")
        tearDown()
        try startRelay(database: ":memory:", ["--acme-domain", Self.domain, "--relay-acme-directory", pebble.directoryURL,
                                              "--relay-acme-ca-file", pebble.caFile, "--relay-acme-dir", state.path, "--relay-acme-http-port", "0"],
                       port: relayPort)
        XCTAssertNotNil(waitForLog(installed, within: 30), "\(logLines())\n\(pebble.log.suffix(2000))")
        XCTAssertTrue(logLines().contains { $0.hasPrefix("relay: ACME certificate for \(Self.domain) installed (tls-alpn-01), valid until ") }, "\(logLines())")
        let root = try scratchDirectory().appendingPathComponent("pebble-root.pem")
        try pebble.rootPEM().write(to: root, atomically: true, encoding: .utf8)
        let verified = try runProcess("/usr/bin/curl", ["-s", "--resolve", "\(Self.domain):\(port):127.0.0.1", "--cacert", root.path,
                                                        "https://\(Self.domain):\(port)/healthz"])
        XCTAssertEqual(verified.stdout, "ok\n", verified.stderr)
        // Once validated, an acme-tls/1 offer finds no challenge and is refused.
        let probe = try runProcess("/bin/sh", ["-c", "openssl s_client -connect 127.0.0.1:\(port) -servername \(Self.domain) -alpn acme-tls/1 </dev/null 2>&1"])
        XCTAssertTrue(probe.stdout.contains("no application protocol") || probe.stdout.contains("alert"), probe.stdout)
    }

    func testACMEIsRefusedBesideCertificateFilesAndForANameThatIsNotADomain() throws {
        let (status, output) = try TetherBinary.run(["relay", "--local", "--acme-domain", Self.domain, "--tls-cert", #filePath, "--tls-key", #filePath])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("RELAY_ACME_DOMAIN: ACME keeps the certificate itself: unset RELAY_TLS_CERT and RELAY_TLS_KEY"), output)
        let (badStatus, badOutput) = try TetherBinary.run(["relay", "--local", "--acme-domain", "*.example.com"])
        XCTAssertEqual(badStatus, 2, badOutput)
        XCTAssertTrue(badOutput.contains("RELAY_ACME_DOMAIN: not a domain name"), badOutput)
    }
}
