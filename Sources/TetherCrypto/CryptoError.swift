/// Every failure TetherCrypto reports. Malformed input always lands here; nothing traps.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key of the wrong length for the algorithm.
    case invalidKeySize(expected: Int, actual: Int)
    /// A nonce of the wrong length for the algorithm.
    case invalidNonceSize(expected: Int, actual: Int)
    /// An authentication tag of the wrong length.
    case invalidTagSize(expected: Int, actual: Int)
    /// A parameter outside what the algorithm allows (named in the payload).
    case invalidParameter(String)
    /// A tag or MAC did not verify: the message was forged, altered or keyed differently.
    case authenticationFailure
    /// A public key that is not a valid encoding or not a point of the curve.
    case invalidPublicKey
    /// A private key that cannot be used (wrong curve, bad encoding).
    case invalidPrivateKey
    /// A signature whose encoding is malformed (as opposed to one that does not verify).
    case invalidSignatureEncoding
    /// An X25519 agreement produced the all-zero secret (a low-order peer point).
    case zeroSharedSecret
    /// PEM or DER input that does not parse.
    case malformedEncoding(String)
    /// A certificate chain that does not verify; the payload is OpenSSL's reason.
    case certificateRejected(String)
    /// An input or output too large for the underlying library call.
    case sizeLimitExceeded
    /// OpenSSL failed in a way that is not the caller's input (the failing call is named).
    case library(String)

    public var description: String {
        switch self {
        case let .invalidKeySize(expected, actual): "invalid key size: expected \(expected) bytes, got \(actual)"
        case let .invalidNonceSize(expected, actual): "invalid nonce size: expected \(expected) bytes, got \(actual)"
        case let .invalidTagSize(expected, actual): "invalid tag size: expected \(expected) bytes, got \(actual)"
        case let .invalidParameter(what): "invalid parameter: \(what)"
        case .authenticationFailure: "authentication failure"
        case .invalidPublicKey: "invalid public key"
        case .invalidPrivateKey: "invalid private key"
        case .invalidSignatureEncoding: "invalid signature encoding"
        case .zeroSharedSecret: "all-zero shared secret"
        case let .malformedEncoding(what): "malformed encoding: \(what)"
        case let .certificateRejected(reason): "certificate rejected: \(reason)"
        case .sizeLimitExceeded: "size limit exceeded"
        case let .library(call): "OpenSSL failure in \(call)"
        }
    }
}
