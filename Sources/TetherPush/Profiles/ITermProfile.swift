public import TetherSync
public import TetherCrypto
public import TetherStore
import TetherWire
import TetherEncoding

/// Profile I, the iTerm2 push relay (push.md §3 with the Tether definitions of §1.1 and §3.7):
/// every check, answer and APNs byte, as pure steps `PushServer` runs in order.
public enum ITermProfile {
    /// A registration lives 90 days from its last write (`REGISTRATION_TTL_SECONDS`).
    public static let registrationLifetime: Duration = .seconds(7_776_000)
    /// Re-registering with the same values rewrites the record only once it is this old.
    public static let rewriteAge = registrationLifetime / 2
    /// Pushes per token, and `/register` requests per client IP, per window.
    public static let pushesPerWindow = 10
    /// The window of ``pushesPerWindow``.
    public static let window: Duration = .seconds(60)

    /// 405: Profile I takes POST only.
    public static let postOnly = PushAnswer.error(405, "POST only")
    /// 404: a path Profile I does not serve.
    public static let noSuchEndpoint = PushAnswer.error(404, "no such endpoint")
    /// 400: the body is over the size cap.
    public static let requestTooLarge = PushAnswer.error(400, "request too large")
    /// 400: the body is not a JSON object.
    public static let invalidJSON = PushAnswer.error(400, "invalid json")
    /// 429: over the per-token push or per-IP `/register` limit.
    public static let rateLimited = PushAnswer.error(429, "rate limited")
    /// 403: no live registration has the token.
    public static let unknownDeviceToken = PushAnswer.error(403, "unknown device token")
    /// 403: the secret does not hash to the registered one.
    public static let badSecret = PushAnswer.error(403, "bad secret")
    /// 200: done.
    public static let ok = PushAnswer(200, #"{"ok":true}"#)
    /// 200: an unchanged registration, not rewritten.
    public static let skipped = PushAnswer(200, #"{"ok":true,"skipped":true}"#)

    static func invalid(_ field: String) -> PushRefusal { PushRefusal(.error(400, "invalid \(field)")) }

    // MARK: /register (§3.2)

    /// A `/register` body that passed validation.
    public struct Registration: Sendable, Equatable {
        /// The APNs device token, lowercase hex.
        public let token: String
        /// SHA-256 of the phone's push secret, lowercase hex.
        public let secretHash: String
        /// Whether the token is for the APNs sandbox.
        public let sandbox: Bool
    }

    /// Validates a `/register` body: the registration, or the refusal to answer.
    public static func registration(from body: [UInt8]) -> Result<Registration, PushRefusal> {
        guard let value = JSONValue.parse(body), case let .object(fields) = value else { return .failure(PushRefusal(invalidJSON)) }
        guard case let .string(token)? = fields["token"], isValidToken(token) else { return .failure(invalid("token")) }
        guard case let .string(secretHash)? = fields["secretHash"], isLowercaseHex(secretHash, count: 64...64) else {
            return .failure(invalid("secretHash"))
        }
        var sandbox = false
        switch fields["sandbox"] {
        case nil: break
        case let .bool(flag)?: sandbox = flag
        default: return .failure(invalid("sandbox"))
        }
        return .success(Registration(token: token, secretHash: secretHash, sandbox: sandbox))
    }

    /// Whether a registration must be written: new, changed, or older than half its lifetime.
    public static func needsWrite(_ registration: Registration, stored: ITermRegistration?, now: WallInstant) -> Bool {
        guard let stored else { return true }
        return stored.secretHash != registration.secretHash || stored.sandbox != registration.sandbox
            || now >= WallInstant(unixMilliseconds: stored.registeredAt) + rewriteAge || stored.registeredAt > now.unixMilliseconds
    }

    /// 32–256 characters of `[0-9a-f]`.
    public static func isValidToken(_ token: String) -> Bool { isLowercaseHex(token, count: 32...256) }

    static func isLowercaseHex(_ text: String, count: ClosedRange<Int>) -> Bool {
        count.contains(text.utf8.count) && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    // MARK: /push and /push/mutable (§3.4–§3.6)

    /// Which push endpoint a body came to.
    public enum Kind: Sendable, Equatable {
        /// `/push/mutable`: the wake-up (or legacy per-chat) push with an optional sealed nonce.
        case mutable
        /// `/push`: a plaintext notification.
        case plain
    }

    /// A push that passed field validation; `secret` is checked later, after the token lookup.
    public struct Push: Sendable, Equatable {
        /// The device token pushed to.
        public let token: String
        /// The push secret as sent (hex), checked against the registration's hash.
        public let secret: String?
        /// The notification's collapse id and its APNs payload.
        public let notification: (collapse: String?, payload: [UInt8])

        public static func == (a: Push, b: Push) -> Bool {
            a.token == b.token && a.secret == b.secret && a.notification.collapse == b.notification.collapse && a.notification.payload == b.notification.payload
        }
    }

    /// JSON and field validation of everything but `secret` (§1.1's order).
    public static func push(_ kind: Kind, from body: [UInt8]) -> Result<Push, PushRefusal> {
        guard let value = JSONValue.parse(body), case let .object(fields) = value else { return .failure(PushRefusal(invalidJSON)) }
        guard case let .string(token)? = fields["token"], isValidToken(token) else { return .failure(invalid("token")) }
        let secret: String? = if case let .string(text)? = fields["secret"] { text } else { nil }
        switch kind {
        case .mutable:
            guard case let .string(collapse)? = fields["collapse"], isLowercaseHex(collapse, count: 1...64) else { return .failure(invalid("collapse")) }
            var nonce: String?
            switch fields["nonce"] {
            case nil: break
            case let .string(text)? where isSealedNonce(text): nonce = text
            default: return .failure(invalid("nonce"))
            }
            return .success(Push(token: token, secret: secret, notification: (collapse, mutablePayload(nonce: nonce))))
        case .plain:
            guard case let .string(title)? = fields["title"] else { return .failure(invalid("title")) }
            guard case let .string(text)? = fields["body"] else { return .failure(invalid("body")) }
            return .success(Push(token: token, secret: secret, notification: (nil, plainPayload(title: title, body: text))))
        }
    }

    /// `^[A-Za-z0-9+/]+={0,2}$`, 1–256 characters.
    static func isSealedNonce(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...256).contains(bytes.count) else { return false }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2, padding < bytes.count else { return false }
        return bytes.dropLast(padding).allSatisfy { byte in
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
    }

    /// The secret against the stored hash: 64 lowercase hex characters whose bytes hash (SHA-256)
    /// to `secretHash`, compared in constant time over the digests. Anything else is `bad secret`.
    public static func isSecretValid(_ secret: String?, for registration: ITermRegistration) -> Bool {
        guard let secret, isLowercaseHex(secret, count: 64...64), let bytes = try? Hex.decode(secret),
              let stored = try? Hex.decode(registration.secretHash) else { return false }
        return constantTimeEquals(SHA256.hash(bytes), stored)
    }

    /// §3.6: the wake-up payload (`n` only with a nonce).
    public static func mutablePayload(nonce: String?) -> [UInt8] {
        let n = nonce.map { ",\"n\":\(JSONValue.quoted($0))" } ?? ""
        return Array(#"{"aps":{"mutable-content":1,"alert":{"title":"iTerm2 Buddy","body":"Your agent has an update."}}\#(n)}"#.utf8)
    }

    /// §3.6: the plaintext payload.
    public static func plainPayload(title: String, body: String) -> [UInt8] {
        Array(#"{"aps":{"alert":{"title":\#(JSONValue.quoted(title)),"body":\#(JSONValue.quoted(body))},"sound":"default"}}"#.utf8)
    }

    /// §3.6 and §3.7: the answer to APNs' outcome.
    public static func answer(_ outcome: APNsOutcome) -> PushAnswer {
        switch outcome {
        case .delivered: ok
        case let .rejected(status, _, _, body): .error(502, "APNs \(status): \(String(decoding: body, as: UTF8.self))")
        case .unreachable: .error(502, "APNs 0: unreachable")
        }
    }
}
