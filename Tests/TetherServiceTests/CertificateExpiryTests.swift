import Foundation
import TetherService
import TetherTestSupport
import XCTest

/// An expired or nearly expired served certificate is said in the log (issue 16 item 11).
final class CertificateExpiryTests: XCTestCase {
    private func certificate(days: Int) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("cert.pem").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", String(days),
                             "-subj", "/CN=127.0.0.1", "-keyout", directory.appendingPathComponent("key.pem").path, "-out", path]
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        process.waitUntilExit()
        return path
    }

    func testACertificateThatExpiresSoonOrHasExpiredIsWarnedAboutAndAFreshOneIsNot() throws {
        let shortLived = try certificate(days: 1)
        let soon = try XCTUnwrap(ServiceListeners.expiryWarning(certificatePath: shortLived, service: "relay"))
        XCTAssertTrue(soon.hasPrefix("relay: warning: the TLS certificate expires at "), soon)
        let expired = try XCTUnwrap(ServiceListeners.expiryWarning(certificatePath: shortLived, service: "push", now: Date().addingTimeInterval(2 * 86_400)))
        XCTAssertTrue(expired.hasPrefix("push: warning: the TLS certificate expired at ") && expired.hasSuffix("clients will refuse it"), expired)
        XCTAssertNil(ServiceListeners.expiryWarning(certificatePath: try certificate(days: 30), service: "relay"))
        XCTAssertNil(ServiceListeners.expiryWarning(certificatePath: nil, service: "relay"))
    }
}
