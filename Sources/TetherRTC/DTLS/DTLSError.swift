/// Why a DTLS association could not be set up, failed, or refused a call.
///
/// There is no "decrypt failure" among them on purpose: a record that fails authentication is
/// discarded silently (RFC 6347 §4.1.2.7), so a forged or corrupted datagram cannot tear down
/// a call. A peer that rejects one of ours says so with an alert (`peerAlert(.badRecordMAC)`).
public enum DTLSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// OpenSSL refused the set-up (context, key, certificate, options).
    case configuration(String)
    /// The peer's certificate is not the one the signed SDP's `a=fingerprint` names.
    case fingerprintMismatch
    /// The peer (a client: a server always presents one) sent no certificate at all.
    case noPeerCertificate
    /// The handshake did not complete within its deadline (or OpenSSL gave up retransmitting).
    case handshakeTimeout
    /// The peer ended the association with this alert.
    case peerAlert(DTLSAlert)
    /// The handshake failed locally for another reason (OpenSSL's reason attached).
    case handshakeFailed(String)
    /// A fatal error after the handshake (OpenSSL's reason attached).
    case protocolFailure(String)
    /// `send` before the handshake completed or after the association closed.
    case notConnected
    /// `send` of more than one record's plaintext (`DTLSTransport.maxMessageSize`).
    case messageTooLarge(size: Int, limit: Int)

    public var description: String {
        switch self {
        case let .configuration(what): "DTLS configuration: \(what)"
        case .fingerprintMismatch: "DTLS: the peer's certificate does not match the SDP fingerprint"
        case .noPeerCertificate: "DTLS: the peer presented no certificate"
        case .handshakeTimeout: "DTLS: handshake timed out"
        case let .peerAlert(alert): "DTLS: the peer sent alert \(alert)"
        case let .handshakeFailed(what): "DTLS handshake: \(what)"
        case let .protocolFailure(what): "DTLS: \(what)"
        case .notConnected: "DTLS: not connected"
        case let .messageTooLarge(size, limit): "DTLS: a \(size)-byte message exceeds the \(limit)-byte record limit"
        }
    }
}
