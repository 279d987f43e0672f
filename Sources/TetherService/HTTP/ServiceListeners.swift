public import Foundation
public import TetherNet
import TetherCrypto

/// A service's listeners, started and stopped together: the public HTTP(S) server (TLS when a
/// certificate and key are configured, on every loop) and, when a port is set, the admin
/// listener. Every service starts them the same way and SIGHUP reloads the same certificate, so
/// this is one piece of the chassis rather than a copy per service.
public struct ServiceListeners: Sendable {
    /// The public HTTP(S) server.
    public let http: HTTPServer
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`, `/status`); nil without an admin
    /// port.
    public let admin: AdminListener?
    /// The certificate SIGHUP reloads (nil when serving plain HTTP).
    public let tls: TLSServerContext?
    /// The certificate ACME keeps, when one is configured instead of files.
    public let acme: ACMECertificates?

    /// Binds both listeners; if the admin one cannot bind, the public one is closed again and
    /// the error thrown (a service never runs half-started).
    public static func start(group: EventLoopGroup, configuration: some ServiceListenerSettings, delegate: any HTTPServerDelegate,
                             metrics: MetricsSource, readiness: ReadinessChecks, status: StatusPage? = nil,
                             service: String = "service", log: @escaping @Sendable (String, LogLevel) -> Void = { _, _ in }) throws -> ServiceListeners {
        var settings = HTTPServer.Configuration()
        settings.host = configuration.host
        settings.port = configuration.port
        settings.sendBufferBytes = configuration.sendBufferBytes
        var tls: TLSServerContext?
        var acme: ACMECertificates?
        if let acmeSettings = configuration.acme {
            let certificates = ACMECertificates(configuration: acmeSettings, log: log)
            try certificates.prepare()
            let challenges = certificates.challenges
            tls = try TLSServerContext(certificateChainPath: certificates.certificatePath, privateKeyPath: certificates.keyPath) { name in
                challenges.alpnCertificate(serverName: name).map { ($0.certificatePEM, $0.keyPEM) }
            }
            acme = certificates
            ServedCertificate.record(certificateChainPath: certificates.certificatePath)
        } else if let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            tls = try TLSServerContext(certificateChainPath: certificate, privateKeyPath: key)
            ServedCertificate.record(certificateChainPath: certificate)
        }
        settings.tls = tls
        let http = HTTPServer(group: group, configuration: settings, delegate: delegate)
        try http.start()
        if let acme, let tls {
            do { try acme.start(tls: tls, group: group, service: service) } catch {
                http.shutdown(grace: .zero)
                throw error
            }
        }
        var admin: AdminListener?
        if let adminPort = configuration.adminPort {
            var adminSettings = AdminListener.Configuration()
            adminSettings.host = configuration.adminHost
            adminSettings.port = adminPort
            let listener = AdminListener(group: group, configuration: adminSettings, metrics: metrics, readiness: readiness, status: status)
            do { try listener.start() } catch {
                acme?.stop()
                http.shutdown(grace: .zero)
                throw error
            }
            admin = listener
        }
        return ServiceListeners(http: http, admin: admin, tls: tls, acme: acme)
    }

    /// SIGHUP: the TLS certificate chain and key are read again; new connections get them, open
    /// ones keep theirs, and a pair that does not load (or match) leaves the current one serving.
    /// Returns the zero-PII lines for the log, prefixed `<service>: `, each at its level: the
    /// reload (info) or its failure (error), then any expiry warning on a line of its own.
    /// With `certificateChainPath` and `privateKeyPath` (SIGHUP found them changed in the
    /// settings), the pair is read from there instead, and served from there on.
    public func reloadCertificates(service: String, certificateChainPath: String? = nil,
                                   privateKeyPath: String? = nil) -> [(text: String, level: LogLevel)] {
        guard let tls else { return [("\(service): SIGHUP: no TLS certificate to reload", .info)] }
        do {
            if let certificateChainPath, let privateKeyPath {
                try tls.load(certificateChainPath: certificateChainPath, privateKeyPath: privateKeyPath)
            } else {
                try tls.reload()
            }
            ServedCertificate.record(certificateChainPath: tls.certificateChainPath)
            return [("\(service): TLS certificate reloaded (SIGHUP)", .info)]
                + (Self.expiryWarning(certificatePath: tls.certificateChainPath, service: service).map { [($0, .warning)] } ?? [])
        } catch {
            return [("\(service): TLS certificate not reloaded, the current one stays: \(error)", .error)]
        }
    }
}

extension ServiceListeners {
    /// A line for the log when the served certificate has expired or expires within a week
    /// (nil otherwise, or when it cannot be read): clients refuse an expired one, and nothing
    /// else would say why.
    public static func expiryWarning(certificatePath: String?, service: String, now: Date = Date()) -> String? {
        guard let certificatePath, let text = try? String(contentsOfFile: certificatePath, encoding: .utf8),
              let leaf = (try? Certificate.chain(pemRepresentation: text))?.first else { return nil }
        let expiry = Date(timeIntervalSince1970: TimeInterval(leaf.notAfter))
        let stamp = ISO8601DateFormatter().string(from: expiry)
        if expiry <= now { return "\(service): warning: the TLS certificate expired at \(stamp); clients will refuse it" }
        if expiry.timeIntervalSince(now) < 7 * 86_400 { return "\(service): warning: the TLS certificate expires at \(stamp)" }
        return nil
    }
}

/// The listener half of a service's configuration, under the names every service uses.
public protocol ServiceListenerSettings {
    /// The public listener's address (`*_HOST`).
    var host: String { get }
    /// The public listener's port (`*_PORT`; 0 picks a free one).
    var port: UInt16 { get }
    /// TLS when both are set.
    var tlsCertificatePath: String? { get }
    /// The private key that goes with ``tlsCertificatePath``.
    var tlsKeyPath: String? { get }
    /// The admin listener's address (loopback unless the operator says otherwise).
    var adminHost: String { get }
    /// No admin listener when nil.
    var adminPort: UInt16? { get }
    /// A certificate kept by ACME, in place of the two files.
    var acme: ACMECertificates.Configuration? { get }
    /// The kernel's send buffer per accepted connection (`HTTPServer.Configuration.sendBufferBytes`).
    var sendBufferBytes: Int? { get }
}

extension ServiceListenerSettings {
    public var acme: ACMECertificates.Configuration? { nil }
    public var sendBufferBytes: Int? { nil }
}
