import TetherWire
import TetherEncoding

/// What Tether does about an APNs failure (push.md §4.5's class column).
public enum APNsFailureClass: String, Sendable, Equatable {
    /// The device token is dead for this topic: the registration is deleted at once.
    case tokenPermanent = "token permanent"
    /// The relay's key, topic or environment is wrong: every push fails alike until an operator
    /// fixes it. The registration is kept; an operator-facing line is logged.
    case configuration
    /// The relay (or a client's out-of-range value) built a bad request: kept, answered 502.
    case requestBug = "request bug"
    /// Try again later: kept.
    case transient
    /// The provider token went stale: mint a new one and send once more (§4.6).
    case retryWithFreshToken = "fix and retry once (re-mint)"
    /// The key id does not match the connection's first: send once more on a new connection.
    case retryOnNewConnection = "fix and retry once (new connection)"
}

/// APNs' failure reasons and their classes (push.md §4.5).
public enum APNsReason {
    /// Every documented reason, by its exact spelling.
    public static let classes: [String: APNsFailureClass] = [
        "BadCollapseId": .requestBug,
        "BadDeviceToken": .tokenPermanent,
        "BadExpirationDate": .requestBug,
        "BadMessageId": .requestBug,
        "BadPriority": .requestBug,
        "BadTopic": .configuration,
        "DeviceTokenNotForTopic": .tokenPermanent,
        "DuplicateHeaders": .requestBug,
        "IdleTimeout": .transient,
        "InvalidPushType": .requestBug,
        "MissingDeviceToken": .requestBug,
        "MissingTopic": .configuration,
        "PayloadEmpty": .requestBug,
        "TopicDisallowed": .configuration,
        "BadCertificate": .configuration,
        "BadCertificateEnvironment": .configuration,
        "ExpiredProviderToken": .retryWithFreshToken,
        "Forbidden": .configuration,
        "InvalidProviderToken": .configuration,
        "MissingProviderToken": .configuration,
        "UnrelatedKeyIdInToken": .retryOnNewConnection,
        "BadEnvironmentKeyInToken": .configuration,
        "BadEnvironmentKeyIdInToken": .configuration,
        "BadPath": .requestBug,
        "MethodNotAllowed": .requestBug,
        "ExpiredToken": .tokenPermanent,
        "Unregistered": .tokenPermanent,
        "PayloadTooLarge": .requestBug,
        "TooManyProviderTokenUpdates": .transient,
        "TooManyRequests": .transient,
        "InternalServerError": .transient,
        "ServiceUnavailable": .transient,
        "Shutdown": .transient,
    ]

    /// The class of a failure answer. Any 410 is token-permanent whatever its reason (both
    /// profiles' rule, §2.7), as is a 400 with `Unregistered` (Mytty accepts it with 400 too); an
    /// unknown reason is transient (§4.5's last line): an APNs change can never wipe registrations.
    public static func classify(status: Int, reason: String?) -> APNsFailureClass {
        if status == 410 { return .tokenPermanent }
        guard let reason, let known = classes[reason] else { return .transient }
        return known
    }

    /// The `reason` of APNs' JSON error body; nil when the body is absent, not JSON, not an object
    /// or has no string `reason` (§2.6: `not json` → nil, `{}` → nil).
    public static func parse(body: [UInt8]) -> String? {
        guard !body.isEmpty, let value = JSONValue.parse(body) else { return nil }
        return value.string("reason")
    }
}
