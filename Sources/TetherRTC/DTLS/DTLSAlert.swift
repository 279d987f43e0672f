import COpenSSL

/// A TLS/DTLS alert description (RFC 5246 §7.2), as the peer sent it.
public struct DTLSAlert: Sendable, Hashable, CustomStringConvertible {
    public let code: UInt8

    public init(code: UInt8) { self.code = code }

    public static let closeNotify = DTLSAlert(code: 0)
    public static let unexpectedMessage = DTLSAlert(code: 10)
    public static let badRecordMAC = DTLSAlert(code: 20)
    public static let handshakeFailure = DTLSAlert(code: 40)
    public static let badCertificate = DTLSAlert(code: 42)
    public static let unsupportedCertificate = DTLSAlert(code: 43)
    public static let certificateUnknown = DTLSAlert(code: 46)
    public static let illegalParameter = DTLSAlert(code: 47)
    public static let decodeError = DTLSAlert(code: 50)
    public static let decryptError = DTLSAlert(code: 51)
    public static let protocolVersion = DTLSAlert(code: 70)
    public static let insufficientSecurity = DTLSAlert(code: 71)
    public static let internalError = DTLSAlert(code: 80)

    /// OpenSSL's name for it ("bad certificate"), and the code.
    public var description: String { "\(String(cString: SSL_alert_desc_string_long(Int32(code)))) (\(code))" }
}
