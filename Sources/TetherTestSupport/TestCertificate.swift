public import Foundation

/// A throwaway self-signed P-256 certificate for 127.0.0.1, made by Debian's openssl: what the
/// end-to-end tests serve TLS with, so each does not spell out the command again.
public enum TestCertificate {
    /// Writes `<name>.crt` and `<name>.key` into `directory`; `commonName` is the subject's CN
    /// (tests tell certificates apart by it), valid from now for `days`.
    public static func make(in directory: URL, name: String = "relay", commonName: String = "127.0.0.1",
                            days: Int = 1) throws -> (certificate: String, key: String) {
        let certificate = directory.appendingPathComponent("\(name).crt").path, key = directory.appendingPathComponent("\(name).key").path
        let made = try runProcess("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                                      "-keyout", key, "-out", certificate, "-days", String(days), "-subj", "/CN=\(commonName)",
                                                      "-addext", "subjectAltName=IP:127.0.0.1"])
        guard made.status == 0 else { throw TestCertificateError(detail: made.stderr) }
        return (certificate, key)
    }
}

/// openssl could not make the certificate; its own words.
public struct TestCertificateError: Error, CustomStringConvertible {
    public let detail: String
    public var description: String { "openssl req failed: \(detail)" }
}
