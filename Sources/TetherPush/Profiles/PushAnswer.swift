public import TetherNet
import TetherWire
import TetherEncoding

/// A push relay answer: a status and a JSON body (every answer of both profiles is JSON with
/// `content-type: application/json`, push.md §2.1, §3.7).
public struct PushAnswer: Sendable, Equatable {
    /// The HTTP status.
    public let status: Int
    /// The JSON body.
    public let json: String

    /// An answer of `status` with `json`.
    public init(_ status: Int, _ json: String) {
        self.status = status
        self.json = json
    }

    /// `{"error":"<text>"}`.
    public static func error(_ status: Int, _ text: String) -> PushAnswer { PushAnswer(status, #"{"error":\#(JSONValue.quoted(text))}"#) }

    /// The answer as an HTTP response (`content-type: application/json`).
    public var response: HTTPResponse { .json(status, Array(json.utf8)) }

    /// The store could not be read or written: said honestly, never a success for a write that
    /// did not happen (Tether definition; both profiles answer it alike).
    public static let storageUnavailable = PushAnswer.error(503, "storage unavailable")
}

/// Request bodies are capped by their JavaScript length (push.md §1.1): the UTF-16 code units of
/// the body decoded as UTF-8, malformed sequences counting as U+FFFD as a browser decodes them.
public enum BodySize {
    /// The cap of both profiles.
    public static let maxUnits = 4_096
    /// The most bytes a body within the cap can have (every unit from a 3-byte sequence): the
    /// HTTP layer reads no more than this, so a larger body is refused before it is read.
    public static let maxBytes = maxUnits * 3

    /// Whether `body` is over the cap: more than 4,096 UTF-16 code units once decoded.
    public static func isTooLarge(_ body: [UInt8]) -> Bool {
        guard body.count > maxUnits else { return false }
        guard body.count <= maxBytes else { return true }
        return String(decoding: body, as: UTF8.self).utf16.count > maxUnits
    }
}
