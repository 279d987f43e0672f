public import TetherCrypto
import TetherSync

/// What the ACME server will come to check while an issuance waits: HTTP-01 key authorizations
/// by token (served at `/.well-known/acme-challenge/<token>`, RFC 8555 §8.3) and TLS-ALPN-01
/// certificates by domain (served to a ClientHello offering `acme-tls/1`, RFC 8737). Shared by the
/// issuing task and the listeners that answer; entries live only while their challenge does.
public final class ACMEChallenges: Sendable {
    /// A TLS-ALPN-01 certificate and its key, as PEM.
    public struct ALPNCertificate: Sendable, Equatable {
        /// The self-signed certificate RFC 8737 asks for, as PEM.
        public let certificatePEM: String
        /// Its private key, as PEM.
        public let keyPEM: String
    }

    private let tokens = Locked<[String: String]>([:])
    private let alpn = Locked<[String: ALPNCertificate]>([:])

    /// An empty set: nothing pending.
    public init() {}

    /// Serves `keyAuthorization` for an HTTP-01 `token` until ``withdraw(token:)``.
    public func publish(token: String, keyAuthorization: String) { tokens.withLock { $0[token] = keyAuthorization } }
    /// Stops serving an HTTP-01 token (its challenge is over).
    public func withdraw(token: String) { _ = tokens.withLock { $0.removeValue(forKey: token) } }

    /// The key authorization for an HTTP-01 token, if its challenge is pending.
    public func keyAuthorization(token: String) -> String? { tokens.withLock { $0[token] } }

    /// Makes the self-signed certificate RFC 8737 §3 asks for: the domain as its only
    /// subjectAltName and the SHA-256 of the key authorization in a critical acmeIdentifier.
    public func publishALPN(domain: String, keyAuthorization: String) throws(ACMEClient.Failure) {
        let key = P256.PrivateKey()
        let digest = HashFunction.sha256.hash(Array(keyAuthorization.utf8))
        let now = WallInstant.now().unixSeconds
        do {
            let certificate = try Certificate.issue(
                subject: domain, subjectKey: key.publicKey, issuer: domain, issuerKey: key, notBefore: now - 60, notAfter: now + 86_400,
                extensions: [
                    Certificate.Extension(oid: "2.5.29.17", der: DER.sequence(DER.tagged(0x82, Array(domain.utf8)))),
                    Certificate.Extension(oid: "1.3.6.1.5.5.7.1.31", der: DER.tagged(0x04, digest), critical: true),
                ])
            alpn.withLock { $0[domain.lowercased()] = ALPNCertificate(certificatePEM: certificate.pemRepresentation, keyPEM: key.pemRepresentation) }
        } catch {
            throw ACMEClient.Failure("TLS-ALPN-01 certificate: \(error)")
        }
    }

    /// Stops serving the TLS-ALPN-01 certificate of `domain` (its challenge is over).
    public func withdrawALPN(domain: String) { _ = alpn.withLock { $0.removeValue(forKey: domain.lowercased()) } }

    /// The TLS-ALPN-01 certificate for a server name, if its challenge is pending.
    public func alpnCertificate(serverName: String) -> ALPNCertificate? { alpn.withLock { $0[serverName.lowercased()] } }

    /// Whether any TLS-ALPN-01 challenge is pending (a handshake need not look otherwise).
    public var hasALPNChallenges: Bool { alpn.withLock { !$0.isEmpty } }
}

/// The two DER shapes the challenge certificate needs (definite lengths, short or long form).
enum DER {
    static func tagged(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
    static func sequence(_ content: [UInt8]) -> [UInt8] { tagged(0x30, content) }

    private static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
}
