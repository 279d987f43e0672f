import COpenSSL
import Glibc
public import TetherCrypto
import TetherWire
import TetherEncoding

/// This side's DTLS identity: a fresh ECDSA P-256 key and a self-signed certificate
/// (ECDSA-SHA256), and the fingerprint the signed SDP carries for it.
///
/// Make one per call and drop it with the call. The certificate proves nothing by itself (it
/// is self-signed); the fingerprint in the signed SDP is what binds it to the Tether identity,
/// so a long-lived certificate buys no trust, while it would let anyone who sees two calls' DTLS
/// handshakes (a TURN server, an on-path observer: the certificate crosses the wire in the
/// clear in DTLS 1.2) link them to one device. A fresh P-256 key costs well under a millisecond.
public struct DTLSCertificate: Sendable {
    public let certificate: Certificate
    public let fingerprint: CertificateFingerprint
    let credential: Credential

    /// How far the validity window reaches back, for peers whose clock runs behind ours.
    /// WebRTC stacks ignore the window of a fingerprint-pinned certificate, but a strict one
    /// should not refuse it either; libwebrtc uses the same day.
    public static let backdating: Int64 = 24 * 60 * 60
    /// Comfortably longer than any call.
    public static let lifetime: Int64 = 30 * 24 * 60 * 60

    /// A fresh key and certificate valid from a day before `now` (Unix seconds; the clock's
    /// by default) for 30 days, with a random common name: a fixed one would be a software
    /// fingerprint of its own.
    public init(now: Int64? = nil) throws(DTLSError) {
        let now = now ?? Int64(time(nil))
        let key = P256.PrivateKey()
        let name = "tether-" + Hex.encode(SecureRandom.bytes(8))
        do {
            certificate = try Certificate.issue(subject: name, subjectKey: key.publicKey, issuer: name, issuerKey: key,
                                                notBefore: now - Self.backdating, notAfter: now + Self.lifetime)
        } catch {
            throw .configuration("certificate: \(error)")
        }
        fingerprint = CertificateFingerprint(of: certificate)
        credential = try Credential(certificate: certificate, key: key)
    }

    /// The certificate and key as OpenSSL objects, made once and lent (up-referenced) to every
    /// SSL_CTX that uses them. OpenSSL allows read-only sharing of both across threads.
    final class Credential: @unchecked Sendable { // an immutable X509 and EVP_PKEY, which OpenSSL lets threads share
        let x509: OpaquePointer
        let pkey: OpaquePointer

        init(certificate: Certificate, key: P256.PrivateKey) throws(DTLSError) {
            let der = certificate.derRepresentation
            let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
                var cursor = buffer.baseAddress
                return d2i_X509(nil, &cursor, buffer.count)
            }
            guard let parsed else {
                ERR_clear_error()
                throw .configuration("certificate DER")
            }
            // TetherCrypto lends its EVP_PKEY to no other module; PKCS#8 in memory is the one
            // way across. The text lives only for this call.
            let pem = Array(key.pemRepresentation.utf8)
            let loaded: OpaquePointer? = pem.withUnsafeBytes { bytes in
                guard let bio = tether_BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
                defer { BIO_free(bio) }
                return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
            }
            guard let loaded else {
                X509_free(parsed)
                ERR_clear_error()
                throw .configuration("private key")
            }
            x509 = parsed
            pkey = loaded
        }

        deinit {
            X509_free(x509)
            EVP_PKEY_free(pkey)
        }
    }
}
