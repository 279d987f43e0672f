import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

/// A throwaway CA and server certificates made with the openssl CLI.
final class TestPKI {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -subj /CN=TetherTestCA -days 2")
        try issue(name: "server", subject: "/CN=localhost", san: "DNS:localhost,IP:127.0.0.1")
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Issues `<name>.pem` (leaf then CA: a chain) and `<name>.key`.
    func issue(name: String, subject: String, san: String) throws {
        try "subjectAltName=\(san)\nbasicConstraints=CA:FALSE\n".write(to: directory.appendingPathComponent("\(name).ext"), atomically: true, encoding: .utf8)
        try openssl("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key -out \(name).csr -subj \(subject)")
        try openssl("x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -out \(name).leaf -days 2 -extfile \(name).ext")
        let chain = try String(contentsOfFile: path("\(name).leaf"), encoding: .utf8) + String(contentsOfFile: path("ca.pem"), encoding: .utf8)
        try chain.write(toFile: path("\(name).pem"), atomically: true, encoding: .utf8)
    }

    private func openssl(_ arguments: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments.split(separator: " ").map(String.init)
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw NetError.invalidAddress("openssl \(arguments)") }
    }
}

final class TLSTests: XCTestCase {
    private var pki: TestPKI!
    private var group: EventLoopGroup!
    private var server: HTTPServer!
    private var context: TLSServerContext!
    private var port: UInt16 = 0

    override func setUpWithError() throws {
        pki = try TestPKI()
        group = try EventLoopGroup(count: 2)
        context = try TLSServerContext(certificateChainPath: pki.path("server.pem"), privateKeyPath: pki.path("server.key"))
        var configuration = HTTPServer.Configuration()
        configuration.tls = context
        server = HTTPServer(group: group, configuration: configuration, delegate: EchoApplication())
        port = try server.start()
    }

    override func tearDown() {
        server.stopAccepting()
        group.shutdown()
    }

    private func sClient(_ extra: [String], brief: Bool = true) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", pki.path("ca.pem")] + (brief ? ["-brief"] : []) + extra
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.runWithSignalsUnblocked()
        try input.fileHandleForWriting.write(contentsOf: Data("GET /nothing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8))
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func testCurlSpeaksHTTPSWithTheGivenCA() throws {
        let result = try runProcess("/usr/bin/curl", ["-sS", "--max-time", "10", "--cacert", pki.path("ca.pem"), "--data-binary", "over tls",
                                                      "https://localhost:\(port)/echo"])
        XCTAssertEqual(result.stdout, "over tls", result.stderr)
        let untrusted = try runProcess("/usr/bin/curl", ["-sS", "--max-time", "10", "https://localhost:\(port)/echo"])
        XCTAssertNotEqual(untrusted.status, 0, "a certificate from an unknown CA is refused")
    }

    func testOpenSSLSClientNegotiatesTLS13AndTLS12WithALPNAndSNI() throws {
        let tls13 = try sClient(["-servername", "localhost", "-alpn", "http/1.1"])
        XCTAssertTrue(tls13.contains("Protocol version: TLSv1.3"), tls13)
        let full = try sClient(["-servername", "localhost", "-alpn", "h2,http/1.1"], brief: false)
        XCTAssertTrue(full.contains("ALPN protocol: http/1.1"), "http/1.1 chosen over h2")
        XCTAssertTrue(tls13.contains("Verification: OK"), tls13)
        XCTAssertTrue(tls13.contains("no route GET /nothing"), tls13)
        let tls12 = try sClient(["-servername", "localhost", "-tls1_2"])
        XCTAssertTrue(tls12.contains("Protocol version: TLSv1.2"), tls12)
        let tls11 = try sClient(["-tls1_1"])
        XCTAssertFalse(tls11.contains("Protocol version: TLSv1.1"), "TLS 1.1 is refused")
    }

    private func get(_ url: String, tls: TLSClientContext?) throws -> Result<HTTPClient.Response, NetError> {
        try waitFor { HTTPClient.request("POST", url, body: Array("hi".utf8), tls: tls, on: group.loops[0], completion: $0) }
    }

    func testTetherClientVerifiesTheCertificateAndHostname() throws {
        let trusted = try TLSClientContext(caFile: pki.path("ca.pem"))
        XCTAssertEqual(try get("https://localhost:\(port)/echo", tls: trusted).get().body, Array("hi".utf8))
        guard case .failure = try get("https://localhost:\(port)/echo", tls: try TLSClientContext()) else {
            return XCTFail("the system store must not trust the test CA")
        }
        // A certificate for another name is refused even from a trusted CA.
        try pki.issue(name: "other", subject: "/CN=other.example", san: "DNS:other.example")
        try FileManager.default.removeItem(atPath: pki.path("server.pem"))
        try FileManager.default.copyItem(atPath: pki.path("other.pem"), toPath: pki.path("server.pem"))
        try FileManager.default.removeItem(atPath: pki.path("server.key"))
        try FileManager.default.copyItem(atPath: pki.path("other.key"), toPath: pki.path("server.key"))
        try context.reload()
        guard case .failure = try get("https://localhost:\(port)/echo", tls: trusted) else {
            return XCTFail("hostname verification must fail for other.example")
        }
    }

    /// The subject of the certificate a fresh connection is served.
    private func servedSubject() throws -> String {
        let output = try sClient(["-servername", "localhost"])
        return output.components(separatedBy: "\n").first { $0.hasPrefix("Peer certificate:") } ?? output
    }

    func testLoadingANewPairServesItToNewConnectionsWhileOpenSessionsKeepTheirs() throws {
        let trusted = try TLSClientContext(caFile: pki.path("ca.pem"))
        let inbox = Inbox()
        let socket = UncheckedBox(try waitFor {
            WebSocketClient.connect("wss://localhost:\(port)/", tls: trusted, delegate: inbox, on: group.loops[0], completion: $0)
        }.get())
        XCTAssertTrue(try servedSubject().contains("CN = localhost"))

        // Loaded from another thread than the loops', as a SIGHUP watcher or admin call would.
        try pki.issue(name: "next", subject: "/CN=localhost-next", san: "DNS:localhost")
        try context.load(certificateChainPath: pki.path("next.pem"), privateKeyPath: pki.path("next.key"))
        XCTAssertTrue(try servedSubject().contains("CN = localhost-next"))
        XCTAssertEqual(context.certificateChainPath, pki.path("next.pem"))
        group.loops[0].execute { socket.value.send(text: Array("after the swap".utf8)) }
        XCTAssertEqual(inbox.next(), "text:after the swap", "the session opened before keeps working")
    }

    func testLoadingAKeyThatDoesNotMatchThrowsAndKeepsTheCurrentPair() throws {
        try pki.issue(name: "next", subject: "/CN=localhost-next", san: "DNS:localhost")
        XCTAssertThrowsError(try context.load(certificateChainPath: pki.path("next.pem"), privateKeyPath: pki.path("server.key")))
        XCTAssertThrowsError(try context.load(certificateChainPath: pki.path("missing.pem"), privateKeyPath: pki.path("next.key")))
        XCTAssertEqual(context.certificateChainPath, pki.path("server.pem"))
        let subject = try servedSubject()
        XCTAssertTrue(subject.contains("CN = localhost") && !subject.contains("localhost-next"), subject)
        XCTAssertEqual(try get("https://localhost:\(port)/echo", tls: try TLSClientContext(caFile: pki.path("ca.pem"))).get().body, Array("hi".utf8))
    }

    func testWSSEchoAndAReloadKeepsOpenConnections() throws {
        let trusted = try TLSClientContext(caFile: pki.path("ca.pem"))
        let inbox = Inbox()
        let socket = UncheckedBox(try waitFor {
            WebSocketClient.connect("wss://localhost:\(port)/", tls: trusted, delegate: inbox, on: group.loops[0], completion: $0)
        }.get())
        group.loops[0].execute { socket.value.send(text: Array("secure".utf8)) }
        XCTAssertEqual(inbox.next(), "text:secure")

        // New certificate on disk, then a reload (what the services' SIGHUP does): new handshakes
        // see it, the open socket carries on.
        try pki.issue(name: "renewed", subject: "/CN=localhost-renewed", san: "DNS:localhost")
        try FileManager.default.removeItem(atPath: pki.path("server.pem"))
        try FileManager.default.copyItem(atPath: pki.path("renewed.pem"), toPath: pki.path("server.pem"))
        try FileManager.default.removeItem(atPath: pki.path("server.key"))
        try FileManager.default.copyItem(atPath: pki.path("renewed.key"), toPath: pki.path("server.key"))
        try context.reload()
        try eventually("the reloaded certificate is served to new connections", within: 5, poll: 0.05) {
            try sClient(["-servername", "localhost"]).contains("localhost-renewed")
        }
        group.loops[0].execute { socket.value.send(text: Array("still open".utf8)) }
        XCTAssertEqual(inbox.next(), "text:still open")
    }
}
