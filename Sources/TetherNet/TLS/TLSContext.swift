import COpenSSL
import CTetherSystem
import Foundation
import Glibc
import TetherSync

/// Why TLS set-up or a TLS connection failed.
public enum TLSError: Error, Equatable, Sendable, CustomStringConvertible {
    case configuration(String)
    case handshake(String)

    public var description: String {
        switch self {
        case let .configuration(what): "TLS configuration: \(what)"
        case let .handshake(what) where what.contains("wrong version number"):
            "TLS handshake: the other end does not speak TLS on this port (\(what)): an https:// URL for a plain http:// port, or the reverse?"
        case let .handshake(what): "TLS handshake: \(what)"
        }
    }

    /// OpenSSL's most recent error as text (and the queue cleared).
    static func lastError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return cText(buffer)
    }
}

/// One SSL_CTX. Immutable once built; OpenSSL allows sharing it across threads.
final class SSLContextBox: @unchecked Sendable { // an SSL_CTX immutable once built, which OpenSSL lets threads share
    let ctx: OpaquePointer
    init(_ ctx: OpaquePointer) { self.ctx = ctx }
    deinit { SSL_CTX_free(ctx) }
}

/// Server-side TLS: a certificate chain and key from PEM files, TLS 1.2 and 1.3, ALPN
/// `http/1.1`, buffers released while a connection is idle. `load` installs a new chain and
/// key, `reload()` re-reads the current files; connections that are already open keep the
/// context they started with.
public final class TLSServerContext: Sendable {
    /// The certificate to serve, instead of the usual one, to a ClientHello that offers ALPN
    /// `acme-tls/1` for a server name: ACME's TLS-ALPN-01 validation (RFC 8737). Nil fails that
    /// handshake (no_application_protocol).
    public typealias ChallengeCertificates = @Sendable (_ serverName: String) -> (certificatePEM: String, keyPEM: String)?

    /// Server-side handshakes that failed, in this process (each service is a process of its own).
    public static let handshakeFailures = NetCounter()

    private static let handshakeFailureObserver = Locked<(@Sendable (String) -> Void)?>(nil)

    /// `observer` is told of each failed server-side handshake and why (OpenSSL's words; never
    /// the peer): the service logs it at debug. One per process, as the counter is.
    public static func observeHandshakeFailures(_ observer: @escaping @Sendable (String) -> Void) {
        handshakeFailureObserver.withLock { $0 = observer }
    }

    static func handshakeFailed(_ reason: String) {
        handshakeFailures.increment()
        handshakeFailureObserver.withLock { $0 }?(reason)
    }

    /// The context serving new connections, and the files it was built from.
    private let loaded: Locked<(context: SSLContextBox, chain: String, key: String)>
    /// Kept for the process's life: every SSL_CTX built points at it.
    private let challenges: ChallengeHook?

    public init(certificateChainPath: String, privateKeyPath: String, challengeCertificates: ChallengeCertificates? = nil) throws(TLSError) {
        let challenges = challengeCertificates.map(ChallengeHook.init)
        self.challenges = challenges
        loaded = Locked((try Self.build(chain: certificateChainPath, key: privateKeyPath, challenges: challenges), certificateChainPath, privateKeyPath))
    }

    /// The chain and key in use (the last ones loaded).
    public var certificateChainPath: String { loaded.withLock { $0.chain } }
    public var privateKeyPath: String { loaded.withLock { $0.key } }

    private static func build(chain: String, key: String, challenges: ChallengeHook?) throws(TLSError) -> SSLContextBox {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw .configuration("SSL_CTX_new: \(TLSError.lastError())") }
        let box = SSLContextBox(ctx)
        guard tether_SSL_CTX_set_min_proto_version(ctx, tether_TLS1_2_VERSION()) == 1 else { throw .configuration("minimum TLS version") }
        guard SSL_CTX_use_certificate_chain_file(ctx, chain) == 1 else { throw .configuration("certificate chain \(chain): \(TLSError.lastError())") }
        guard SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 else { throw .configuration("private key \(key): \(TLSError.lastError())") }
        guard SSL_CTX_check_private_key(ctx) == 1 else { throw .configuration("the private key does not match the certificate") }
        _ = tether_SSL_CTX_set_mode(ctx, tether_SSL_MODE_RELEASE_BUFFERS() | tether_SSL_MODE_ENABLE_PARTIAL_WRITE())
        if let challenges {
            tether_SSL_CTX_select_acme_or_http11(ctx)
            SSL_CTX_set_client_hello_cb(ctx, { ssl, alert, argument in
                guard let ssl, let argument, tether_client_hello_offers_acme_tls(ssl) == 1 else { return tether_SSL_CLIENT_HELLO_SUCCESS() }
                let hook = Unmanaged<ChallengeHook>.fromOpaque(argument).takeUnretainedValue()
                var name = [CChar](repeating: 0, count: 256)
                guard tether_client_hello_server_name(ssl, &name, name.count) == 1,
                      let pair = hook.lookup(cText(name).lowercased()), ChallengeHook.install(pair, on: ssl) else {
                    alert?.pointee = tether_SSL_AD_NO_APPLICATION_PROTOCOL()
                    return tether_SSL_CLIENT_HELLO_ERROR()
                }
                return tether_SSL_CLIENT_HELLO_SUCCESS()
            }, Unmanaged.passUnretained(challenges).toOpaque())
        } else {
            tether_SSL_CTX_select_http11(ctx)
        }
        return box
    }

    /// Serves `certificateChainPath` and `privateKeyPath` to connections accepted from now
    /// on; open sessions keep the certificate they started with. The pair is loaded and checked
    /// (the key must match the leaf) before anything changes: on failure this throws and the
    /// current pair stays in use. Safe from any thread (a SIGHUP watcher, an admin request).
    public func load(certificateChainPath: String, privateKeyPath: String) throws(TLSError) {
        let fresh = try Self.build(chain: certificateChainPath, key: privateKeyPath, challenges: challenges)
        loaded.withLock { $0 = (fresh, certificateChainPath, privateKeyPath) }
    }

    /// Re-reads the current certificate chain and key files (renewed in place). On failure the
    /// old context stays in use.
    public func reload() throws(TLSError) {
        let (chain, key) = loaded.withLock { ($0.chain, $0.key) }
        try load(certificateChainPath: chain, privateKeyPath: key)
    }

    var context: SSLContextBox { loaded.withLock { $0.context } }
}

/// The TLS-ALPN-01 lookup, as the client-hello callback reaches it.
final class ChallengeHook: Sendable {
    let lookup: TLSServerContext.ChallengeCertificates
    init(_ lookup: @escaping TLSServerContext.ChallengeCertificates) { self.lookup = lookup }

    /// Puts the challenge certificate and key on this one connection.
    static func install(_ pair: (certificatePEM: String, keyPEM: String), on ssl: OpaquePointer) -> Bool {
        func read<T>(_ pem: String, _ parse: (OpaquePointer) -> T?) -> T? {
            // A memory BIO reads the bytes in place: it must not outlive them.
            Array(pem.utf8).withUnsafeBytes { bytes in
                guard let bio = tether_BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
                defer { BIO_free(bio) }
                return parse(bio)
            }
        }
        guard let certificate = read(pair.certificatePEM, { PEM_read_bio_X509($0, nil, nil, nil) }) else { return false }
        defer { X509_free(certificate) }
        guard let key = read(pair.keyPEM, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else { return false }
        defer { EVP_PKEY_free(key) }
        return SSL_use_certificate(ssl, certificate) == 1 && SSL_use_PrivateKey(ssl, key) == 1
    }
}

/// Client-side TLS: peers are verified against the system trust store or a given CA file,
/// with SNI and hostname verification always on. There is deliberately no way to turn
/// verification off.
public final class TLSClientContext: @unchecked Sendable { // holds only an immutable SSL_CTX box
    let box: SSLContextBox

    /// - Parameters:
    ///   - caFile: a PEM bundle to trust instead of the system store.
    ///   - extraRootsFile: a PEM bundle to trust in addition to the system store (an operator's
    ///     private stand-in: `CLOUDFLARE_CA_FILE`); never instead of it.
    public init(caFile: String? = nil, extraRootsFile: String? = nil) throws(TLSError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .configuration("SSL_CTX_new: \(TLSError.lastError())") }
        box = SSLContextBox(ctx)
        guard tether_SSL_CTX_set_min_proto_version(ctx, tether_TLS1_2_VERSION()) == 1 else { throw .configuration("minimum TLS version") }
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else { throw .configuration("CA file \(caFile): \(TLSError.lastError())") }
        } else {
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else { throw .configuration("system trust store: \(TLSError.lastError())") }
            if let extraRootsFile {
                guard SSL_CTX_load_verify_locations(ctx, extraRootsFile, nil) == 1 else {
                    throw .configuration("CA file \(extraRootsFile): \(TLSError.lastError())")
                }
            }
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        _ = tether_SSL_CTX_set_mode(ctx, tether_SSL_MODE_RELEASE_BUFFERS() | tether_SSL_MODE_ENABLE_PARTIAL_WRITE())
        // Offer HTTP/1.1 by ALPN.
        let protocols: [UInt8] = [8] + Array("http/1.1".utf8)
        _ = SSL_CTX_set_alpn_protos(ctx, protocols, UInt32(protocols.count))
    }
}
