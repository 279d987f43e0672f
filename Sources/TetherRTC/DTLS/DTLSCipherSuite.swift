import COpenSSL

/// The cipher suites a `DTLSTransport` may negotiate: ECDHE for forward secrecy, ECDSA for
/// the P-256 certificates, AEAD record protection (no CBC padding to get wrong). WebRTC
/// requires the first (RFC 8827 §6.5); browsers offer all three.
public enum DTLSCipherSuite: String, CaseIterable, Sendable {
    case ecdheECDSAWithAES128GCMSHA256 = "ECDHE-ECDSA-AES128-GCM-SHA256"
    case ecdheECDSAWithAES256GCMSHA384 = "ECDHE-ECDSA-AES256-GCM-SHA384"
    case ecdheECDSAWithChaCha20Poly1305 = "ECDHE-ECDSA-CHACHA20-POLY1305"

    /// OpenSSL's name for the suite.
    public var openSSLName: String { rawValue }

    /// The least an encrypted record's fragment holds: the explicit nonce (8 bytes, AES-GCM
    /// only; RFC 5288 §3, RFC 7905 §2) and the 16-byte tag.
    var minimumEncryptedFragment: Int { self == .ecdheECDSAWithChaCha20Poly1305 ? 16 : 8 + 16 }

    /// The suite an OpenSSL SSL_CIPHER stands for, if it is one of these.
    init?(_ cipher: OpaquePointer?) {
        guard let cipher, let name = SSL_CIPHER_get_name(cipher) else { return nil }
        self.init(rawValue: String(cString: name))
    }
}
