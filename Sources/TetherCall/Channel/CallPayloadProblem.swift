/// What makes a received payload malformed (§9.5); each one terminates the channel.
public enum CallPayloadProblem: Error, Equatable, Sendable, CustomStringConvertible {
    /// More than 32,768 encoded bytes.
    case tooLarge
    /// Not one strict JSON object: invalid JSON, a duplicate key, or not an object.
    case notJSONObject
    /// `v` missing, not an integer, or not 2.
    case version
    /// `type` missing, not a string, or neither `text` nor `receipt`.
    case unknownType
    /// A required field missing or of the wrong type or form (`id`, `text`, `sentAt`).
    case field(String)
    /// `text` with no scalar or more than 4,000.
    case textLength

    /// A sentence naming the limit that was broken.
    public var description: String {
        switch self {
        case .tooLarge: "payload exceeds \(CallChannelLimits.maxPayloadBytes) bytes"
        case .notJSONObject: "not a strict JSON object"
        case .version: "v is not 2"
        case .unknownType: "unknown type"
        case let .field(name): "missing or invalid \(name)"
        case .textLength: "text is not 1 to 4,000 characters"
        }
    }
}
