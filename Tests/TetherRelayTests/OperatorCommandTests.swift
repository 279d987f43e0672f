import Foundation
import TetherService
import TetherTestSupport
import XCTest

/// What an operator meets first, on the real binary (issue "Ready to deploy", found from outside).
final class OperatorCommandTests: XCTestCase {
    private static var binary: URL { TetherBinary.url }

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try TetherBinary.run(arguments, environment: environment)
    }

    /// Runs a peer command and collects what it narrates on standard error until `text` appears
    /// (or 20 s pass, or it exits); then stops it.
    private func narration(of arguments: [String], until text: String) throws -> String {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        process.standardInput = Pipe()
        try process.runWithSignalsUnblocked()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var said = ""
        let deadline = Date().addingTimeInterval(20)
        while !said.contains(text), Date() < deadline {
            let line = errors.fileHandleForReading.readFirstLine()
            if line.isEmpty { break }
            said += line
        }
        return said
    }

    func testHelpInEveryUsualSpellingAndTheVersion() throws {
        for spelling in ["--help", "-h", "help"] {
            let answer = try run([spelling])
            XCTAssertEqual(answer.status, 0, spelling)
            XCTAssertTrue(answer.output.hasPrefix("usage: tether <command>"), answer.output)
        }
        XCTAssertEqual(try run(["--version"]).output, "tether \(TetherVersion.current)\n")
        XCTAssertEqual(try run(["relay", "--version"]).output, "tether \(TetherVersion.current)\n")
        XCTAssertEqual(try run(["push", "--version"]).output, "tether \(TetherVersion.current)\n")
        XCTAssertEqual(try run(["nonsense"]).status, 2)
    }

    func testTheStartUpLineSaysWhatTheRelayDoesAndWhichRelease() throws {
        func startUpLine(_ arguments: [String], _ environment: [String: String]) throws -> String {
            let process = Process()
            process.executableURL = Self.binary
            process.arguments = ["relay", "--relay-port", "0", "--relay-db", ":memory:"] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.runWithSignalsUnblocked()
            defer {
                process.interrupt()
                process.waitUntilExit()
            }
            return output.fileHandleForReading.readFirstLine()
        }
        let origin = ["RELAY_ORIGIN": "https://relay.example.com"]
        let open = try startUpLine(["--attest-required", "false"], origin)
        XCTAssertTrue(open.contains("attest=false, tls=off, admin=off) tether \(TetherVersion.current)"), open)
        let attested = try startUpLine([], origin.merging(["ATTEST_REQUIRED": "true", "APP_ID": "ABCDE12345.com.example.app"]) { $1 })
        XCTAssertTrue(attested.contains("attest=required, tls=off, admin=off)"), attested)
    }

    func testALocalRelayOnPortZeroOrIPv6AdvertisesTheAddressItReallyBound() throws {
        for (host, expected) in [("127.0.0.1", "http://127.0.0.1:"), ("::1", "http://[::1]:")] {
            let process = Process()
            process.executableURL = Self.binary
            process.arguments = ["relay", "--local", "--relay-port", "0", "--relay-host", host, "--relay-db", ":memory:"]
            let output = Pipe(), errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.runWithSignalsUnblocked()
            defer {
                process.interrupt()
                process.waitUntilExit()
            }
            let line = output.fileHandleForReading.readFirstLine()
            let port = try XCTUnwrap(line.split(separator: " ")[3].split(separator: ":").last.flatMap { UInt16($0) }, line)
            XCTAssertNotEqual(port, 0, line)
            let note = errors.fileHandleForReading.readFirstLine()
            XCTAssertTrue(note.contains("origin \(expected)\(port),"), note)
        }
    }

    func testFailedOrHelpPeerCommandsLeaveNoStateDirectoryBehind() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("tether-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["XDG_STATE_HOME": home.path]
        for command in ["phone", "mac", "unpair"] {
            let help = try run([command, "help"], environment: environment)
            XCTAssertEqual(help.status, 0, command)
            XCTAssertTrue(help.output.hasPrefix("usage: tether \(command)"), help.output)
        }
        XCTAssertNotEqual(try run(["phone"], environment: environment).status, 0)
        XCTAssertNotEqual(try run(["phone", "iterm2://pair?garbage"], environment: environment).status, 0)
        XCTAssertNotEqual(try run(["mac"], environment: environment).status, 0)
        XCTAssertNotEqual(try run(["unpair"], environment: environment).status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home.path), "nothing was created")
    }

    func testPublicMetricsCanBeKeptToTheAdminListener() throws {
        let admin = RelayProcess.freePort()   // the admin port takes no 0
        let relay = try RelayProcess(["--relay-public-metrics", "false", "--relay-admin-port", String(admin)])
        defer { relay.stop() }
        let port = relay.port
        func curl(_ url: String) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code}", url]
            let output = Pipe()
            process.standardOutput = output
            try process.runWithSignalsUnblocked()
            process.waitUntilExit()
            return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        XCTAssertEqual(try curl("http://127.0.0.1:\(port)/metrics"), "400", "no longer answered before the room gate")
        XCTAssertEqual(try curl("http://127.0.0.1:\(port)/healthz"), "400")
        XCTAssertEqual(try curl("http://127.0.0.1:\(admin)/metrics"), "200")
    }

    func testASecondServerOnATakenPortFailsAtStartInsteadOfSharingIt() throws {
        let first = try RelayProcess()
        defer { first.stop() }
        let port = first.port
        let second = try run(["relay", "--local", "--relay-port", String(port), "--relay-db", ":memory:"])
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.output.hasSuffix("tether: relay: cannot start: 127.0.0.1:\(port) is already in use by another process (another server on this port?)\n"),
                      second.output)
        XCTAssertEqual(second.output.split(separator: "\n").filter { $0.hasPrefix("tether:") }.count, 1, "one line says why")
    }

    func testAnUntrustedRelayCertificateIsNamedAsACertificateProblem() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (cert, key) = (directory.appendingPathComponent("cert.pem").path, directory.appendingPathComponent("key.pem").path)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert]
        openssl.standardError = FileHandle.nullDevice
        try openssl.runWithSignalsUnblocked()
        openssl.waitUntilExit()
        let relay = try RelayProcess(["--tls-cert", cert, "--tls-key", key])
        defer { relay.stop() }
        let mac = try run(["mac", "--relay", "https://127.0.0.1:\(relay.port)", "--state", directory.appendingPathComponent("mac").path])
        XCTAssertNotEqual(mac.status, 0)
        XCTAssertTrue(mac.output.contains("TLS: handshake failed: certificate: self-signed certificate"), mac.output)
    }

    func testPhoneErrorsSayWhatToDo() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("tether-phone-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let bad = try run(["phone", "iterm2://pair?garbage", "--state", home.appendingPathComponent("bad").path])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.output.hasPrefix("tether: phone: "), bad.output)
        XCTAssertFalse(bad.output.contains("(found:") || bad.output.contains("malformedURL") || bad.output.contains("unsupportedVersion"),
                       "no internal names: \(bad.output)")

        // A link whose Mac has gone (stopped, or its link expired): the phone says what to do.
        let relay = try RelayProcess()
        defer { relay.stop() }
        let link = try macLink(relay: relay.origin, state: home.appendingPathComponent("mac").path)
        XCTAssertTrue(link.hasPrefix("iterm2://"), link)
        let said = try narration(of: ["phone", link, "--state", home.appendingPathComponent("phone").path], until: "Show a new link on the Mac")
        XCTAssertTrue(said.contains("mac offline"), said)
        XCTAssertTrue(said.contains("its pairing link has probably expired, or `tether mac` was stopped. Show a new link on the Mac"), said)
    }

    func testAMacRefusesToPairThroughASpellingOfTheRelayOtherThanItsOrigin() throws {
        let relay = try RelayProcess()
        defer { relay.stop() }
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("tether-origin-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let mac = try run(["mac", "--relay", "http://localhost:\(relay.port)", "--state", state.path])
        XCTAssertEqual(mac.status, 1)
        XCTAssertTrue(mac.output.contains("mac: the relay at http://localhost:\(relay.port) signs with the origin \(relay.origin); pair with --relay \(relay.origin)"),
                      mac.output)
        let said = try narration(of: ["mac", "--relay", relay.origin, "--state", state.path], until: "expires after")
        XCTAssertTrue(said.contains("expires after"), "the exact origin pairs: \(said)")

        // A link made elsewhere with the other spelling: the phone refuses it before pairing.
        let link = try macLink(relay: relay.origin, state: state.appendingPathComponent("mac2").path).replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let phone = try run(["phone", link, "--state", state.appendingPathComponent("phone").path])
        XCTAssertEqual(phone.status, 1)
        XCTAssertTrue(phone.output.contains("but that relay signs with the origin \(relay.origin)"), phone.output)
    }

    /// A failed first run leaves no state directory (and no device key) behind, whatever failed:
    /// a bad flag, a CA file that is not there, an origin the relay does not sign with, a host
    /// name that does not resolve. Each failure names the problem.
    func testAFailedFirstRunLeavesNoStateBehindAndNamesTheProblem() throws {
        let relay = try RelayProcess()
        defer { relay.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tether-fresh-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let cases: [(arguments: [String], status: Int32, says: String)] = [
            (["mac", "--relay", relay.origin, "--link-lifetime", "soon"], 2, "mac: --link-lifetime needs a positive number of seconds (such as 90 or 90s): soon"),
            (["mac", "--relay", relay.origin, "--ca", root.appendingPathComponent("nope.pem").path], 2, "mac: --ca "),
            (["mac", "--relay", "http://localhost:\(relay.port)"], 1, "signs with the origin \(relay.origin)"),
            (["mac", "--relay", "https://relay.invalid"], 1, "cannot resolve relay.invalid"),
        ]
        for (index, (arguments, status, says)) in cases.enumerated() {
            let state = root.appendingPathComponent("state-\(index)")
            let answer = try run(arguments + ["--state", state.path])
            XCTAssertEqual(answer.status, status, "\(arguments): \(answer.output)")
            XCTAssertTrue(answer.output.contains(says), "\(arguments): \(answer.output)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: state.path), "\(arguments) left \(state.path) behind")
        }
    }

    /// The expiry message says the lifetime the link was given.
    func testAPairingLinkThatExpiresSaysTheLifetimeItWasGiven() throws {
        let relay = try RelayProcess()
        defer { relay.stop() }
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("tether-lifetime-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let said = try narration(of: ["mac", "--relay", relay.origin, "--state", state.path, "--link-lifetime", "2s"], until: "without a phone")
        XCTAssertTrue(said.contains("expires after 2 seconds without use"), said)
        XCTAssertTrue(said.contains("The pairing link expired (2 seconds without a phone); a new one was made."), said)
    }

    /// The pairing link a `tether mac` prints on standard output (the Mac is stopped after).
    private func macLink(relay: String, state: String) throws -> String {
        let mac = Process()
        mac.executableURL = Self.binary
        mac.arguments = ["mac", "--relay", relay, "--state", state]
        let output = Pipe()
        mac.standardOutput = output
        mac.standardError = FileHandle.nullDevice
        mac.standardInput = Pipe()
        try mac.runWithSignalsUnblocked()
        defer {
            mac.terminate()
            mac.waitUntilExit()
        }
        var link = ""
        while !link.hasPrefix("iterm2://") {
            link = output.fileHandleForReading.readFirstLine().trimmingCharacters(in: .whitespacesAndNewlines)
            if link.isEmpty, !mac.isRunning { break }
        }
        return link
    }

    func testShardmapRefusesADatabaseThatDoesNotExistAndCreatesNone() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tether-missing-\(UUID().uuidString)/relay.db").path
        let answer = try run(["shardmap", "show", "--relay-db", path])
        XCTAssertEqual(answer.status, 2, "a bad path is a usage error (issue 28)")
        XCTAssertTrue(answer.output.hasPrefix("tether: shardmap: no relay database at \(path)"), answer.output)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    func testTheMacSaysHowLongItsLinkReallyLives() throws {
        let relay = try RelayProcess()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("tether-mac-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let narration = try narration(of: ["mac", "--relay", relay.origin, "--state", state.path, "--link-lifetime", "3"], until: "expires after")
        XCTAssertTrue(narration.contains("The link expires after 3 seconds without use."), narration)
    }
}
