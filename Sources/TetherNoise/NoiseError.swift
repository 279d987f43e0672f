/// Every failure of a Noise handshake or channel.
public enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The protocol name is malformed or names something this implementation does not do.
    case unsupportedProtocol(String)
    /// A key the pattern needs was not supplied (`s`, `rs` or a pre-message key).
    case missingKey(String)
    /// A message failed authentication (tampered, replayed, reordered, wrong key or prologue).
    case authenticationFailure
    /// A previous failure poisoned this state; nothing more can be done with it.
    case poisoned
    /// The nonce reached 2^64 − 1, which Noise reserves; the channel must be re-keyed or closed.
    case nonceExhausted
    /// A message longer than Noise's 65535-byte limit.
    case messageTooLarge(Int)
    /// A handshake message too short for the tokens it must carry.
    case truncatedMessage
    /// A handshake call made when it is the other party's turn or after the handshake ended.
    case outOfTurn
    /// A transport operation before the handshake completed.
    case handshakeIncomplete
    /// A public key the DH function rejects (a low-order point gives the all-zero secret).
    case invalidPublicKey
    /// A reassembled application frame would exceed the caller's cap.
    case frameTooLarge(limit: Int)

    public var description: String {
        switch self {
        case let .unsupportedProtocol(name): "unsupported Noise protocol \"\(name)\""
        case let .missingKey(which): "missing key: \(which)"
        case .authenticationFailure: "Noise authentication failure"
        case .poisoned: "Noise state poisoned by an earlier failure"
        case .nonceExhausted: "Noise nonce exhausted"
        case let .messageTooLarge(size): "Noise message of \(size) bytes exceeds 65535"
        case .truncatedMessage: "truncated Noise handshake message"
        case .outOfTurn: "Noise handshake message out of turn"
        case .handshakeIncomplete: "Noise handshake not complete"
        case .invalidPublicKey: "invalid Noise public key"
        case let .frameTooLarge(limit): "application frame exceeds \(limit) bytes"
        }
    }
}
