public import Foundation
public import TetherNet
import TetherCrypto
import TetherSync
import Glibc
import Synchronization

/// A service's own certificate, obtained and renewed over ACME in-process (RFC 8555): kept in a
/// state directory (owner-only), installed into the serving TLS context when it changes — new
/// connections get it, open ones keep theirs, so nothing is dropped — and renewed once two
/// thirds of its lifetime have passed.
///
/// Until the first certificate arrives the listener serves a self-signed placeholder, so a
/// service can start (and answer TLS-ALPN-01, which needs its TLS port) before it has one.
public final class ACMECertificates: Sendable {
    /// What to obtain and where to keep it: the `*_ACME_*` settings, read by ``ACMESettings``.
    public struct Configuration: Sendable, Equatable {
        /// The names on the certificate (the first is its common name).
        public var domains: [String]
        /// The account's contact address for expiry notices; nil registers without one.
        public var email: String?
        /// The ACME server's directory URL (Let's Encrypt's production directory by default).
        public var directoryURL: String
        /// An extra PEM trust root for the ACME server (a private or test CA), beside the system's.
        public var caFile: String?
        /// Where the account key, the certificate and its key live.
        public var stateDirectory: String
        /// The HTTP-01 listener (port 80 for a public server); nil answers TLS-ALPN-01 only.
        public var httpHost: String
        /// The HTTP-01 listener's port (80 for a public server); nil answers TLS-ALPN-01 only.
        public var httpPort: UInt16?

        /// Let's Encrypt's production directory.
        public static let letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

        /// A configuration; only `domains`, `email` and `stateDirectory` have no default.
        public init(domains: [String], email: String?, directoryURL: String = letsEncrypt, caFile: String? = nil,
                    stateDirectory: String, httpHost: String = "0.0.0.0", httpPort: UInt16? = 80) {
            self.domains = domains
            self.email = email
            self.directoryURL = directoryURL
            self.caFile = caFile
            self.stateDirectory = stateDirectory
            self.httpHost = httpHost
            self.httpPort = httpPort
        }

        var challengeTypes: [ACMEClient.ChallengeType] { httpPort == nil ? [.tlsALPN01] : [.http01, .tlsALPN01] }
    }

    /// What this instance obtains, and where it keeps it.
    public let configuration: Configuration
    /// The pending challenges, which the service's TLS listener and the HTTP-01 listener answer
    /// from.
    public let challenges = ACMEChallenges()
    private let log: @Sendable (String, LogLevel) -> Void
    private struct Running {
        var task: Task<Void, Never>?
        var httpListener: HTTPServer?
    }

    private let running = Locked(Running())

    /// Certificates for `configuration`; `log` receives each line (issuance, renewal, failure) with
    /// its level.
    public init(configuration: Configuration, log: @escaping @Sendable (String, LogLevel) -> Void) {
        self.configuration = configuration
        self.log = log
    }

    /// Where the certificate chain (PEM) is kept: `<state directory>/<first domain>.crt`.
    public var certificatePath: String { path(configuration.domains[0] + ".crt") }
    /// Where the certificate's private key (PEM) is kept: `<state directory>/<first domain>.key`.
    public var keyPath: String { path(configuration.domains[0] + ".key") }
    private var accountKeyPath: String { path("account.key") }
    private func path(_ name: String) -> String { (configuration.stateDirectory as NSString).appendingPathComponent(name) }

    /// Makes sure a certificate and key are on disk for the listener to start with: the one
    /// kept from an earlier run, or a one-day self-signed placeholder.
    public func prepare() throws(ACMEClient.Failure) {
        do {
            try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            // Foundation's words ("The file doesn't exist.") name neither the path nor the cause;
            // the system's, from the same call made directly, do.
            let reason = mkdir(configuration.stateDirectory, 0o700) == 0 ? "\(error)" : String(cString: strerror(errno))
            throw ACMEClient.Failure("cannot create the ACME directory \(configuration.stateDirectory) (*_ACME_DIR): \(reason)")
        }
        guard currentLeaf() == nil else { return }
        let key = P256.PrivateKey()
        let now = WallInstant.now().unixSeconds
        do {
            let placeholder = try Certificate.issue(subject: configuration.domains[0], subjectKey: key.publicKey, issuer: configuration.domains[0],
                                                    issuerKey: key, notBefore: now - 60, notAfter: now + 86_400)
            try Self.writeOwnerOnly(key.pemRepresentation, to: keyPath)
            try Self.writeOwnerOnly(placeholder.pemRepresentation, to: certificatePath)
        } catch {
            throw ACMEClient.Failure("cannot write a placeholder certificate in \(configuration.stateDirectory): \(error)")
        }
    }

    /// Starts the HTTP-01 listener (if configured) and the issue/renew task, which installs each
    /// new certificate into `tls`. `service` prefixes the log lines.
    public func start(tls: TLSServerContext, group: EventLoopGroup, service: String) throws {
        if let port = configuration.httpPort {
            var settings = HTTPServer.Configuration()
            settings.host = configuration.httpHost
            settings.port = port
            let listener = HTTPServer(group: group, configuration: settings, delegate: ACMEHTTPResponder(challenges: challenges))
            try listener.start()
            running.withLock { $0.httpListener = listener }
        }
        let loop = group.loops[0]
        let task = Task { [self] in await renewForever(tls: tls, loop: loop, service: service) }
        running.withLock { $0.task = task }
    }

    /// Stops renewing and closes the HTTP-01 listener; the certificate on disk stays.
    public func stop() {
        let stopped = running.withLock { running in
            defer { running = Running() }
            return running
        }
        stopped.task?.cancel()
        stopped.httpListener?.shutdown(grace: .zero)
    }

    /// The HTTP-01 listener's bound port (tests bind port 0).
    public var httpPort: UInt16? { running.withLock { $0.httpListener }?.port }

    private func renewForever(tls: TLSServerContext, loop: EventLoop, service: String) async {
        var backOff: UInt64 = 30
        while !Task.isCancelled {
            let wait: UInt64
            if let due = renewalDelay(), due > 0 {
                wait = min(due, 12 * 3600)
            } else {
                do {
                    let (leaf, proved) = try await issue(loop: loop)
                    try tls.load(certificateChainPath: certificatePath, privateKeyPath: keyPath)
                    let how = proved.isEmpty ? "authorizations still valid" : Set(proved.map(\.rawValue)).sorted().joined(separator: ", ")
                    log("\(service): ACME certificate for \(configuration.domains.joined(separator: ", ")) installed (\(how)), valid until \(Self.stamp(leaf.notAfter))", .info)
                    ServedCertificate.record(certificateChainPath: certificatePath)
                    ACMEOutcomes.successes.add(1, ordering: .relaxed)
                    backOff = 30
                    continue
                } catch {
                    // An error: a certificate that cannot be renewed expires, and alerting watches
                    // the error level (and tether_acme_issuances_total{outcome="failure"}).
                    log("\(service): ACME issuance failed, retrying in \(backOff) s: \(error)", .error)
                    ACMEOutcomes.failures.add(1, ordering: .relaxed)
                    wait = backOff
                    backOff = min(backOff * 2, 6 * 3600)
                }
            }
            try? await Task.sleep(nanoseconds: wait * 1_000_000_000)
        }
    }

    /// Seconds until the kept certificate is due for renewal (0 or less: now; nil: none kept,
    /// or only the placeholder).
    func renewalDelay() -> UInt64? {
        guard let leaf = currentLeaf(), !leaf.isSelfIssued else { return nil }
        let now = WallInstant.now().unixSeconds
        let renewAt = leaf.notAfter - (leaf.notAfter - leaf.notBefore) / 3
        return renewAt > now ? UInt64(renewAt - now) : 0
    }

    private func currentLeaf() -> Certificate? {
        guard let text = try? String(contentsOfFile: certificatePath, encoding: .utf8) else { return nil }
        return (try? Certificate.chain(pemRepresentation: text))?.first
    }

    /// One issuance: the account key (made once and kept), a fresh certificate key, the chain.
    private func issue(loop: EventLoop) async throws -> (Certificate, [ACMEClient.ChallengeType]) {
        let tls = try TLSClientContext(extraRootsFile: configuration.caFile)
        let accountKey: P256.PrivateKey
        if let pem = try? String(contentsOfFile: accountKeyPath, encoding: .utf8) {
            accountKey = try P256.PrivateKey(pemRepresentation: pem)
        } else {
            accountKey = P256.PrivateKey()
            try Self.writeOwnerOnly(accountKey.pemRepresentation, to: accountKeyPath)
        }
        let certificateKey = P256.PrivateKey()
        let client = ACMEClient(directoryURL: configuration.directoryURL, accountKey: ACMEAccountKey(accountKey), tls: tls, loop: loop)
        let (chain, proved) = try await client.issue(domains: configuration.domains, contact: configuration.email, certificateKey: certificateKey,
                                                     challenges: challenges, accepting: configuration.challengeTypes)
        // The key first: a chain on disk always has its key beside it.
        try Self.writeOwnerOnly(certificateKey.pemRepresentation, to: keyPath)
        try Self.writeOwnerOnly(chain, to: certificatePath)
        guard let leaf = try Certificate.chain(pemRepresentation: chain).first else { throw ACMEClient.Failure("empty chain") }
        return (leaf, proved)
    }

    /// Written to a temporary file (0600) and renamed over the old one: a reader sees the old
    /// file or the new one, never half of either.
    static func writeOwnerOnly(_ text: String, to path: String) throws {
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ACMEClient.Failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw ACMEClient.Failure("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    static func stamp(_ seconds: Int64) -> String { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds))) }
}

/// The HTTP-01 listener: `GET /.well-known/acme-challenge/<token>` answers the pending key
/// authorization (RFC 8555 §8.3); everything else is 404.
final class ACMEHTTPResponder: HTTPServerDelegate {
    let challenges: ACMEChallenges
    static let prefix = "/.well-known/acme-challenge/"

    init(challenges: ACMEChallenges) { self.challenges = challenges }

    func respond(to request: HTTPServerRequest) -> HTTPResponse {
        let path = request.head.path
        guard request.head.method == "GET" || request.head.method == "HEAD", path.hasPrefix(Self.prefix),
              let keyAuthorization = challenges.keyAuthorization(token: String(path.dropFirst(Self.prefix.count))) else {
            return .text(404, "not found")
        }
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/octet-stream")
        return HTTPResponse(status: 200, headers: headers, body: Array(keyAuthorization.utf8))
    }
}
