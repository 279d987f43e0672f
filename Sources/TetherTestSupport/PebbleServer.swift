public import Foundation
import Glibc

/// Let's Encrypt's test ACME server of the test's own (Debian `pebble`): its HTTPS API on a free
/// loopback port with a certificate from a throwaway CA, and `pebble-challtestsrv` as its DNS,
/// answering every name with 127.0.0.1 — so pebble validates challenges against the service
/// under test on loopback, on the ports it is told. Gone at `shutdown()`.
public final class PebbleServer: @unchecked Sendable {   // set up in init, shut down once
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/pebble") }

    public let directory: URL
    public let apiPort: UInt16, managementPort: UInt16, dnsPort: UInt16
    /// Where pebble connects to validate HTTP-01 and TLS-ALPN-01 challenges.
    public let httpPort: UInt16, tlsPort: UInt16
    private var processes: [Process] = []

    public var directoryURL: String { "https://localhost:\(apiPort)/dir" }
    /// The CA that signed pebble's own HTTPS certificate (an ACME client's extra trust root).
    public var caFile: String { directory.appendingPathComponent("ca.pem").path }
    public var log: String { (try? String(contentsOf: directory.appendingPathComponent("pebble.log"), encoding: .utf8)) ?? "" }

    /// - Parameters:
    ///   - validitySeconds: the lifetime of the certificates it issues (short ones test renewal).
    ///   - tlsPort: where TLS-ALPN-01 is validated (the service's TLS port, when it answers it).
    public init(validitySeconds: Int = 86_400 * 90, tlsPort: UInt16? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-pebble-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Chosen before start: pebble and its challenge server take their ports from their
        // configuration, and neither reports a port 0 bound.
        (apiPort, managementPort, dnsPort, httpPort) = (RelayProcess.freePort(), RelayProcess.freePort(), RelayProcess.freePort(), RelayProcess.freePort())
        self.tlsPort = tlsPort ?? RelayProcess.freePort()
        let path = directory.path
        try Self.sh("""
            cd '\(path)' && \
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=pebble test CA' \
              -addext basicConstraints=critical,CA:TRUE && \
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out request.csr -subj '/CN=localhost' && \
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext && \
            openssl x509 -req -in request.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cert.pem -days 2 -extfile san.ext
            """)
        let config = """
            {"pebble": {"listenAddress": "127.0.0.1:\(apiPort)", "managementListenAddress": "127.0.0.1:\(managementPort)",
              "certificate": "\(path)/cert.pem", "privateKey": "\(path)/key.pem", "httpPort": \(httpPort), "tlsPort": \(self.tlsPort),
              "ocspResponderURL": "", "externalAccountBindingRequired": false, "certificateValidityPeriod": \(validitySeconds)}}
            """
        try config.write(to: directory.appendingPathComponent("pebble.json"), atomically: true, encoding: .utf8)
        try launch("/usr/bin/pebble-challtestsrv", ["-defaultIPv4", "127.0.0.1", "-defaultIPv6", "", "-dns01", "127.0.0.1:\(dnsPort)",
                                                    "-http01", "", "-https01", "", "-tlsalpn01", "", "-management", "127.0.0.1:\(RelayProcess.freePort())"],
               log: "challtestsrv.log", environment: [:])
        // No random validation sleeps, no authorization reuse: each issuance proves its challenge.
        try launch("/usr/bin/pebble", ["-config", directory.appendingPathComponent("pebble.json").path, "-dnsserver", "127.0.0.1:\(dnsPort)"],
                   log: "pebble.log", environment: ["PEBBLE_VA_NOSLEEP": "1", "PEBBLE_AUTHZREUSE": "0"])
        if Eventually.holds(within: 10, every: 0.05, { (try? runProcess("/usr/bin/curl", ["-sf", "--cacert", caFile, directoryURL]).status) == 0 }) {
            return
        }
        shutdown()
        throw Vectors.Failure.notFound("pebble did not start: \(log)")
    }

    deinit { shutdown() }

    /// Pebble's issuing root (made afresh each run), for checking what it issued.
    public func rootPEM() throws -> String {
        let result = try runProcess("/usr/bin/curl", ["-sf", "--cacert", caFile, "https://localhost:\(managementPort)/roots/0"])
        guard result.status == 0 else { throw Vectors.Failure.notFound("pebble's root: \(result.stderr)") }
        return result.stdout
    }

    public func shutdown() {
        for process in processes where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        processes = []
        try? FileManager.default.removeItem(at: directory)
    }

    private func launch(_ path: String, _ arguments: [String], log: String, environment: [String: String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let file = directory.appendingPathComponent(log)
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        process.standardOutput = handle
        process.standardError = handle
        try process.runWithSignalsUnblocked()
        processes.append(process)
    }

    private static func sh(_ script: String) throws {
        let result = try runProcess("/bin/sh", ["-c", script])
        guard result.status == 0 else { throw Vectors.Failure.notFound("pebble certificates: \(result.stderr)") }
    }
}
