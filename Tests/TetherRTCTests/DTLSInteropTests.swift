import Foundation
import TetherCrypto
import TetherRTC
import TetherTestSupport
import XCTest

/// A `DTLSTransport` server against OpenSSL's own DTLS client over UDP on loopback: what
/// goes on the wire is real DTLS 1.2, not an agreement between two copies of this code.
final class DTLSInteropTests: XCTestCase {
    func testOpenSSLsClientConnectsExchangesDataAndSeesCloseNotify() throws {
        for suite in [DTLSCipherSuite.ecdheECDSAWithAES128GCMSHA256, .ecdheECDSAWithChaCha20Poly1305] {
            let run = try runAgainstSClient(forcing: suite)
            XCTAssertNil(run.server.failure, "\(suite)")
            XCTAssertEqual(run.received, Array("ping\n".utf8), "\(suite)")
            XCTAssertEqual(run.server.peerCertificate, run.peerCertificate)
            XCTAssertTrue(run.exited, "s_client saw close_notify and left")
            XCTAssertTrue(run.transcript.contains("pong"), run.transcript)
        }
    }

    func testOpenSSLsClientWithAnotherCertificateIsRefused() throws {
        let run = try runAgainstSClient(forcing: .ecdheECDSAWithAES128GCMSHA256, expecting: DTLSCertificate().fingerprint)
        XCTAssertEqual(run.server.failure, .fingerprintMismatch)
        XCTAssertEqual(run.received, [])
        XCTAssertTrue(run.exited, "s_client gave up on the alert")
        XCTAssertTrue(run.transcript.contains("alert bad certificate"), run.transcript)
        XCTAssertFalse(run.transcript.contains("pong"))
    }

    func testOpenSSLsClientWithoutACertificateIsRefused() throws {
        let run = try runAgainstSClient(forcing: .ecdheECDSAWithAES128GCMSHA256, presentingCertificate: false)
        XCTAssertEqual(run.server.failure, .noPeerCertificate)
        XCTAssertEqual(run.received, [])
        XCTAssertTrue(run.exited)
        XCTAssertFalse(run.transcript.contains("pong"))
    }

    private struct Run {
        let server: DTLSTransport
        let peerCertificate: Certificate
        let received: [UInt8]
        let exited: Bool
        let transcript: String
    }

    /// Runs `openssl s_client -dtls1_2` with its own self-signed certificate (as a browser
    /// would have; or none) against a server transport expecting `expected` (s_client's real
    /// fingerprint by default). s_client sends "ping"; the server answers "pong" and closes.
    private func runAgainstSClient(forcing suite: DTLSCipherSuite, expecting expected: CertificateFingerprint? = nil,
                                   presentingCertificate: Bool = true) throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dtls-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = P256.PrivateKey()
        let now = Int64(Date().timeIntervalSince1970)
        let peerCertificate = try Certificate.issue(subject: "s_client", subjectKey: key.publicKey, issuer: "s_client", issuerKey: key,
                                                    notBefore: now - 60, notAfter: now + 3600)
        let keyPath = directory.appendingPathComponent("key.pem").path, certificatePath = directory.appendingPathComponent("cert.pem").path
        try key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        try peerCertificate.pemRepresentation.write(toFile: certificatePath, atomically: true, encoding: .utf8)

        let socket = try LoopbackUDPSocket()
        let server = try DTLSTransport(role: .server, certificate: DTLSCertificate(),
                                       remoteFingerprint: expected ?? CertificateFingerprint(of: peerCertificate)) { socket.send($0) }
        var received: [UInt8] = []
        server.onApplicationData = { received += $0 }

        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        client.arguments = ["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(socket.port)", "-quiet", "-cipher", suite.openSSLName]
            + (presentingCertificate ? ["-cert", certificatePath, "-key", keyPath] : [])
        let input = Pipe(), output = Pipe()
        client.standardInput = input
        client.standardOutput = output
        client.standardError = output
        try client.runWithSignalsUnblocked()
        defer { if client.isRunning { client.terminate() } }
        try input.fileHandleForWriting.write(contentsOf: Data("ping\n".utf8))

        server.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, server.state != .closed {
            if let datagram = socket.receive(timeout: min(server.nextTimeout ?? .milliseconds(50), .milliseconds(50))) {
                server.receive(datagram)
            }
            server.handleTimeout()
            if received == Array("ping\n".utf8) {
                try server.send(Array("pong\n".utf8))
                server.close()
            }
        }
        _ = Eventually.holds(within: max(0, Double((deadline - ContinuousClock.now).components.seconds) + 0.5)) { !client.isRunning }
        let exited = !client.isRunning
        if !exited { client.terminate() }
        let transcript = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Run(server: server, peerCertificate: peerCertificate, received: received, exited: exited, transcript: transcript)
    }
}
