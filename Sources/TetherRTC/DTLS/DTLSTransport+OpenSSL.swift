import COpenSSL
import TetherCrypto

/// The OpenSSL side: one SSL_CTX and SSL per association, and the three callbacks through
/// which OpenSSL reports back (peer certificate, alerts, retransmission interval).
extension DTLSTransport {
    /// A context per association: its certificate is the call's own and so is its verify
    /// callback's expected fingerprint; no session cache or ticket can carry one association's
    /// trust into another. The SSL object holds the context from SSL_new on.
    static func makeSession(role: DTLSRole, credential: DTLSCertificate.Credential, options: Options,
                            sink: DTLSDatagramSink) throws(DTLSError) -> (ssl: OpaquePointer, networkIn: OpaquePointer) {
        guard let ctx = SSL_CTX_new(DTLS_method()) else { throw .configuration("SSL_CTX_new: \(openSSLError())") }
        defer { SSL_CTX_free(ctx) }
        guard tether_SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) == 1,
              tether_SSL_CTX_set_max_proto_version(ctx, DTLS1_2_VERSION) == 1 else { throw .configuration("DTLS 1.2 only: \(openSSLError())") }
        let cipherList = options.cipherSuites.map(\.openSSLName).joined(separator: ":")
        guard SSL_CTX_set_cipher_list(ctx, cipherList) == 1 else { throw .configuration("cipher suites: \(openSSLError())") }
        guard SSL_CTX_use_certificate(ctx, credential.x509) == 1, SSL_CTX_use_PrivateKey(ctx, credential.pkey) == 1,
              SSL_CTX_check_private_key(ctx) == 1 else { throw .configuration("certificate and key: \(openSSLError())") }
        // No MTU discovery: the link MTU is given, and the BIO is not a socket. No tickets, no
        // session cache, no renegotiation: each would be a handshake without a fresh check of
        // the peer's certificate.
        _ = SSL_CTX_set_options(ctx, tether_SSL_OP_NO_QUERY_MTU() | tether_SSL_OP_NO_TICKET() | tether_SSL_OP_NO_RENEGOTIATION())
        _ = tether_SSL_CTX_disable_session_cache(ctx)
        // The use_srtp extension (RFC 5764), although a data channel carries no media: WebRTC
        // stacks negotiate it on every peer connection, and some (aiortc) fail a handshake that
        // selects no profile. Tether offers and selects the profiles browsers use and never
        // exports SRTP keys. (The call returns 0 on success.)
        guard SSL_CTX_set_tlsext_use_srtp(ctx, "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") == 0 else {
            throw .configuration("use_srtp: \(openSSLError())")
        }
        // Both sides demand a certificate. The fingerprint decides, in place of chain
        // verification (the certificates are self-signed): see `verifyPeer`.
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        SSL_CTX_set_cert_verify_callback(ctx, verifyPeer, nil)
        SSL_CTX_set_info_callback(ctx, noteAlert)

        guard let ssl = SSL_new(ctx) else { throw .configuration("SSL_new: \(openSSLError())") }
        guard let networkIn = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .configuration("BIO_new: \(openSSLError())")
        }
        guard let networkOut = sink.makeBIO() else {
            BIO_free(networkIn)
            SSL_free(ssl)
            throw .configuration("BIO_new: \(openSSLError())")
        }
        SSL_set_bio(ssl, networkIn, networkOut)   // the SSL object now owns both BIOs
        guard tether_DTLS_set_link_mtu(ssl, options.mtu) == 1 else {
            SSL_free(ssl)
            throw .configuration("link MTU \(options.mtu): \(openSSLError())")
        }
        DTLS_set_timer_cb(ssl, retransmissionInterval)
        if role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
        return (ssl, networkIn)
    }

    /// The transport an SSL object belongs to (nil once it is being freed).
    static func owner(of ssl: OpaquePointer?) -> DTLSTransport? {
        guard let ssl, let pointer = SSL_get_ex_data(ssl, 0) else { return nil }
        return Unmanaged<DTLSTransport>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// What ended a handshake or read that OpenSSL reported as failed, most specific first:
    /// our own rejection of the certificate, the peer's alert, OpenSSL giving up on
    /// retransmissions or finding no client certificate, then OpenSSL's reason as text.
    func failureReason(_ sslError: Int32) -> DTLSError {
        defer { ERR_clear_error() }
        if rejectedPeer { return .fingerprintMismatch }
        if let fatalAlertReceived { return .peerAlert(fatalAlertReceived) }
        if sslError == SSL_ERROR_ZERO_RETURN { return .peerAlert(.closeNotify) }
        switch tether_ERR_GET_REASON(ERR_peek_last_error()) {
        case SSL_R_READ_TIMEOUT_EXPIRED: return .handshakeTimeout
        case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE: return .noPeerCertificate
        default: break
        }
        let reason = Self.openSSLError()
        return state == .connected ? .protocolFailure(reason) : .handshakeFailed(reason)
    }

    /// The certificate the session holds for the peer, parsed.
    func peerCertificateInSession() -> Certificate? {
        guard let x509 = SSL_get0_peer_certificate(ssl) else { return nil }
        return Self.certificate(x509)
    }

    static func certificate(_ x509: OpaquePointer) -> Certificate? {
        var der: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &der)
        guard length > 0, let der else { return nil }
        defer { CRYPTO_free(der, #fileID, #line) }
        return try? Certificate(derRepresentation: UnsafeRawBufferPointer(start: der, count: Int(length)))
    }

    /// OpenSSL's most recent error as text (and the queue cleared).
    static func openSSLError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func microseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        return UInt32(clamping: seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
    }
}

/// Replaces OpenSSL's chain verification (a self-signed certificate has no chain to verify):
/// the peer's leaf certificate is accepted only if it is the one the signed SDP names.
///
/// It runs while the handshake is in progress, as soon as the peer's Certificate message
/// arrives, rather than as a check after `SSL_do_handshake` returns: a refusal here aborts the
/// handshake inside OpenSSL with a bad_certificate alert, before this side sends its Finished,
/// so no path exists on which either side reaches application data with the wrong peer. A
/// check afterwards would leave that to every caller's ordering, and the peer would think the
/// handshake complete.
private func verifyPeer(_ store: OpaquePointer?, _: UnsafeMutableRawPointer?) -> Int32 {
    guard let store else { return 0 }
    let ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()).map(OpaquePointer.init)
    guard let transport = DTLSTransport.owner(of: ssl) else { return 0 }
    guard let leaf = X509_STORE_CTX_get0_cert(store), let certificate = DTLSTransport.certificate(leaf),
          transport.remoteFingerprint.matches(certificate) else {
        transport.rejectedPeer = true
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
        return 0
    }
    return 1
}

/// Keeps the peer's fatal alert, so a failure reads as what the peer said rather than as
/// OpenSSL's generic "alert received".
private func noteAlert(_ ssl: OpaquePointer?, _ event: Int32, _ value: Int32) {
    guard event & SSL_CB_ALERT != 0, event & SSL_CB_READ != 0, value >> 8 == SSL3_AL_FATAL,
          let transport = DTLSTransport.owner(of: ssl) else { return }
    transport.fatalAlertReceived = DTLSAlert(code: UInt8(truncatingIfNeeded: value))
}

/// RFC 6347 §4.2.4.1: the configured first wait, then doubling up to 60 s.
private func retransmissionInterval(_ ssl: OpaquePointer?, _ previous: UInt32) -> UInt32 {
    if previous == 0 { return DTLSTransport.owner(of: ssl)?.initialTimeoutMicroseconds ?? 1_000_000 }
    return min(previous * 2, 60_000_000)
}
