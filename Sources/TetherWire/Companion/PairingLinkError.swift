/// Why a pairing link was refused, named as the iTerm2 clients name them (client.md §2.2).
public enum PairingLinkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not `iterm2://pair?...`.
    case malformedURL
    /// `v` is absent or not 1 or 2 (`found` is the raw value, nil when absent).
    case unsupportedVersion(found: String?)
    /// `proto` is not `Noise_XK_25519_ChaChaPoly_BLAKE2s`.
    case unsupportedProtocol(found: String?)
    /// `rs` does not decode to exactly 32 bytes.
    case invalidResponderKey
    /// `pid` is absent or empty.
    case missingPairingID
    /// The v1 `relay` origin breaks a rule of §2.3.
    case invalidRelay
    /// The v2 `resolver` is absent or breaks a rule of §2.4.
    case invalidResolver

    /// The text the phone shows.
    public var userMessage: String {
        switch self {
        case .malformedURL: "This QR code is not an iTerm2 pairing code"
        case .unsupportedVersion, .unsupportedProtocol: "Upgrade the iOS app to the newest version to scan this code"
        case .invalidResponderKey, .missingPairingID, .invalidRelay, .invalidResolver: "This QR code is invalid"
        }
    }

    public var description: String {
        switch self {
        case .malformedURL: "malformedURL"
        case let .unsupportedVersion(found): "unsupportedVersion(found: \(found ?? "nil"))"
        case let .unsupportedProtocol(found): "unsupportedProtocol(found: \(found ?? "nil"))"
        case .invalidResponderKey: "invalidResponderKey"
        case .missingPairingID: "missingPairingID"
        case .invalidRelay: "invalidRelay"
        case .invalidResolver: "invalidResolver"
        }
    }
}
