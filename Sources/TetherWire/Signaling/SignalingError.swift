/// The `error` codes of signaling.md §5.6, each with the text the server sends as `message`
/// (human-readable, not for parsing).
public enum SignalingErrorCode: String, Sendable, Hashable, CaseIterable {
    case badMessage = "bad_message"
    case challengeExpired = "challenge_expired"
    case badSignature = "bad_signature"
    case duplicateID = "duplicate_id"
    case registrationPending = "registration_pending"
    case alreadyRegistered = "already_registered"
    case notRegistered = "not_registered"
    case offline
    case rateLimited = "rate_limited"
    case unavailable
    case tooLarge = "too_large"
    case `internal`

    public var defaultMessage: String {
        switch self {
        case .badMessage: "malformed message"
        case .challengeExpired: "the challenge expired"
        case .badSignature: "signature does not verify"
        case .duplicateID: "this ID is already connected"
        case .registrationPending: "registration in progress"
        case .alreadyRegistered: "already registered"
        case .notRegistered: "register first"
        case .offline: "recipient is not online"
        case .rateLimited: "too many messages; slow down"
        case .unavailable: "service unavailable; try again later"
        case .tooLarge: "message too large"
        case .internal: "internal error"
        }
    }
}
