import Foundation
import TetherService
import TetherSync

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

    /// Written straight to the descriptor, so a supervisor (or a test) sees it at once. Under
    /// `json` it is a JSON object like every other line; otherwise the plain line scripts wait
    /// for (`relay: listening on`), whatever stderr's format.
    static func write(_ line: String) {
        let text = ServiceOutput.isJSON ? ServiceOutput.rendered(String(line.dropLast()), level: .info) : line
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// How a service command writes what it says before (and beside) its log sink: start-up notes
/// and warnings, the `listening on` line, a refusal to start. Plain until the service's settings
/// are read; then in its `*_LOG_FORMAT`, above its `*_LOG_LEVEL`.
enum ServiceOutput {
    private static let style = Locked<(service: String, format: LogFormat, level: LogLevel)?>(nil)

    static func adopt(service: String, format: LogFormat, level: LogLevel) { style.withLock { $0 = (service, format, level) } }

    /// `line` (which starts `<service>: `) as the format writes it, newline included.
    static func rendered(_ line: String, level: LogLevel) -> String {
        guard let (service, format, _) = style.withLock({ $0 }), format != .plain else { return line + "\n" }
        return format.render(line, level: level, service: service) + "\n"
    }

    /// A note or warning to standard error, unless below the service's level.
    static func note(_ line: String, level: LogLevel) {
        if let threshold = style.withLock({ $0?.level }), level < threshold { return }
        FileHandle.standardError.write(Data(rendered(line, level: level).utf8))
    }

    /// Whether the service writes a format of its own (timestamp or json), so `fail` writes in it.
    static var isFormatted: Bool { style.withLock { $0.map { $0.format != .plain } ?? false } }

    static var isJSON: Bool { style.withLock { $0?.format == .json } }
}
