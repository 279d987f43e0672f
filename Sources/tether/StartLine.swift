import Foundation
import TetherService

/// The line a service prints on standard output once it listens, which supervisors, tests and
/// operators read: where it listens (IPv6 in brackets), then the specification's own fields,
/// then what an operator checks first on a new host: TLS (off, on from files, or ACME with its
/// domain), the admin listener, and the build.
/// `relay: listening on [::1]:8787 (db=relay.db, attest=required, tls=acme relay.example.com, admin=9787) tether 0.5.0`
enum StartLine {
    static func line(_ service: String, host: String, port: UInt16, fields: [String], tlsCertificate: String?,
                     acme: ACMECertificates.Configuration?, adminPort: UInt16?) -> String {
        let tls = acme.map { "acme \($0.domains.joined(separator: ","))" } ?? (tlsCertificate == nil ? "off" : "on")
        let admin = adminPort.map(String.init) ?? "off"
        let all = fields + ["tls=\(tls)", "admin=\(admin)"]
        return "\(service): listening on \(address(host, port)) (\(all.joined(separator: ", "))) tether \(TetherVersion.current)\n"
    }

    /// `127.0.0.1:8787`, `[::1]:8787`.
    static func address(_ host: String, _ port: UInt16) -> String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Written straight to the descriptor, so a supervisor (or a test) sees it at once.
    static func write(_ line: String) { FileHandle.standardOutput.write(Data(line.utf8)) }
}
