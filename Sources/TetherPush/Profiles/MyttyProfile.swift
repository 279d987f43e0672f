import TetherSync
public import TetherCrypto
public import TetherNet
public import TetherStore
import TetherWire
import TetherEncoding

/// Profile M, the Mytty push relay (push.md §2): every check, answer and APNs byte, as pure
/// steps. `PushServer` runs them in §2.5's order, with the store read and the APNs call between.
public enum MyttyProfile {
    // MARK: Constants (§2.1, §2.2, §2.5)

    /// A registration lives 180 days from its last successful delivery.
    public static let registrationLifetime: Duration = .seconds(15_552_000)
    /// Pushes are accepted within ±300 s of the relay's clock, inclusive.
    public static let timestampWindow: UInt64 = 300

    /// 404: a method or path Profile M does not serve.
    public static let notFound = PushAnswer.error(404, "not found")
    /// 401: the credentials are missing, the timestamp is outside the window, the push id is
    /// unknown, or the signature does not verify.
    public static let unauthorized = PushAnswer.error(401, "unauthorized")
    /// 413: the body is over the size cap.
    public static let payloadTooLarge = PushAnswer.error(413, "payload too large")
    /// 400: the device token is not valid.
    public static let invalidDeviceToken = PushAnswer.error(400, "invalid deviceToken")
    /// 400: the environment is neither `production` nor `sandbox`.
    public static let invalidEnvironment = PushAnswer.error(400, "invalid environment")
    /// 400: the push body is not valid.
    public static let invalidPayload = PushAnswer.error(400, "invalid payload")
    /// 200: APNs accepted the push.
    public static let delivered = PushAnswer(200, #"{"ok":true}"#)
    /// Tether's per-IP `/v1/register` limit (`PUSH_REGISTER_RATE_LIMIT`; the Worker keeps none),
    /// answered as Profile I answers its own.
    public static let rateLimited = PushAnswer.error(429, "rate limited")
    /// The window of the `/v1/register` limit.
    public static let registerWindow: Duration = .seconds(60)

    // MARK: /v1/register (§2.2)

    /// The registration a `/v1/register` body asks for, or its 400.
    public static func registration(from body: [UInt8]) -> Result<(deviceToken: String, environment: PushEnvironment), PushRefusal> {
        // A body that is not JSON is answered like a missing token (the reference reads the
        // fields of whatever parsed, or of nothing).
        let value = JSONValue.parse(body)
        guard let token = value?.string("deviceToken"), isValidDeviceToken(token) else { return .failure(.init(invalidDeviceToken)) }
        guard let environmentText = value?.string("environment"), let environment = PushEnvironment(rawValue: environmentText) else {
            return .failure(.init(invalidEnvironment))
        }
        return .success((token, environment))
    }

    /// 32–200 characters of `[0-9a-fA-F]`.
    public static func isValidDeviceToken(_ token: String) -> Bool {
        (32...200).contains(token.utf8.count) && token.utf8.allSatisfy(\.isHexDigit)
    }

    /// A fresh registration's answer: `pushID` a random UUID v4 in lowercase canonical form, and
    /// `relaySecret` standard base64 of 32 random bytes.
    public static func newRegistration(random: (Int) -> [UInt8]) -> (pushID: String, relaySecret: String) {
        (uuid(random(16)), Base64.encode(random(32)))
    }

    /// The answer to a registration: its push id and relay secret.
    public static func registered(pushID: String, relaySecret: String) -> PushAnswer {
        PushAnswer(200, #"{"pushID":\#(JSONValue.quoted(pushID)),"relaySecret":\#(JSONValue.quoted(relaySecret))}"#)
    }

    /// RFC 9562 version 4 from 16 random bytes, lowercase (as `crypto.randomUUID()` prints it).
    static func uuid(_ bytes: [UInt8]) -> String {
        var b = bytes
        b[6] = b[6] & 0x0F | 0x40
        b[8] = b[8] & 0x3F | 0x80
        let hex = Hex.encode(b)
        let u = Array(hex.utf8)
        return [u[0..<8], u[8..<12], u[12..<16], u[16..<20], u[20..<32]].map { String(decoding: $0, as: UTF8.self) }.joined(separator: "-")
    }

    // MARK: /v1/push (§2.4, §2.5)

    /// Step 1's three headers.
    public struct Credentials: Sendable, Equatable {
        /// `x-mytty-push-id`.
        public let pushID: String
        /// `x-mytty-timestamp`: seconds since 1970, as sent.
        public let timestamp: String
        /// `x-mytty-signature` over `<timestamp>.<body>`.
        public let signature: String
    }

    /// Step 1: the push id and signature present, the timestamp `^[0-9]{1,12}$` and within
    /// ±300 s of `nowSeconds` (inclusive); nil means 401. Repeated headers read as the Fetch API
    /// joins them (`a, b`), which never passes.
    public static func credentials(_ head: HTTPRequestHead, nowSeconds: UInt64) -> Credentials? {
        func header(_ name: String) -> String? {
            let values = head.headers.values(name)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }
        guard let pushID = header("x-mytty-push-id"), !pushID.isEmpty,
              let signature = header("x-mytty-signature"), !signature.isEmpty,
              let timestamp = header("x-mytty-timestamp"),
              (1...12).contains(timestamp.utf8.count), timestamp.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let seconds = UInt64(timestamp) else { return nil }
        let skew = seconds > nowSeconds ? seconds - nowSeconds : nowSeconds - seconds
        guard skew <= timestampWindow else { return nil }
        return Credentials(pushID: pushID, timestamp: timestamp, signature: signature)
    }

    /// Steps 3–4: the signature checked against the registration's secret in constant time, as
    /// strings (lowercase hex, lengths equal). With no registration the same work is done with a
    /// dummy key, so timing does not tell an unknown id from a bad signature.
    public static func isAuthentic(_ credentials: Credentials, body: [UInt8], registration: MyttyRegistration?) -> Bool {
        let secret = registration.flatMap { try? Base64.decode($0.relaySecret) } ?? dummySecret
        let expected = MyttyPush.requestSignature(relaySecret: secret, timestamp: credentials.timestamp, body: body)
        let matches = constantTimeEquals(Array(expected.utf8), Array(credentials.signature.utf8))
        return matches && registration != nil
    }

    private static let dummySecret = [UInt8](repeating: 0, count: 32)

    /// Step 5 and §2.6: the APNs notification for an authenticated push, or 400 `invalid payload`.
    public static func notification(body: [UInt8], registration: MyttyRegistration, topic: String) -> Result<APNsNotification, PushRefusal> {
        guard let value = JSONValue.parse(body), case .object = value,
              let ciphertext = value.string("ciphertext"), let macID = value.string("macID") else { return .failure(.init(invalidPayload)) }
        let payload = apnsPayload(title: value.string("title") ?? "Mytty", body: value.string("placeholder") ?? "", macID: macID, ciphertext: ciphertext)
        return .success(APNsNotification(environment: registration.environment, deviceToken: registration.deviceToken, topic: topic,
                                         collapseID: value.string("collapseID"), payload: payload))
    }

    /// §2.6's payload, keys in the reference's order.
    public static func apnsPayload(title: String, body: String, macID: String, ciphertext: String) -> [UInt8] {
        Array(("{\"aps\":{\"alert\":{\"title\":\(JSONValue.quoted(title)),\"body\":\(JSONValue.quoted(body))},"
            + "\"sound\":\"default\",\"mutable-content\":1,\"interruption-level\":\"time-sensitive\",\"thread-id\":\"mytty-attention\"},"
            + "\"m\":\(JSONValue.quoted(macID)),\"c\":\(JSONValue.quoted(ciphertext))}").utf8)
    }

    /// Step 7's answer to APNs' outcome.
    public static func answer(_ outcome: APNsOutcome) -> PushAnswer {
        switch outcome {
        case .delivered:
            delivered
        case let .rejected(status, reason, _, _):
            PushAnswer(502, #"{"error":\#(JSONValue.quoted(reason ?? "apns rejected")),"status":\#(status)}"#)
        case .unreachable:
            PushAnswer(502, #"{"error":"apns unreachable","status":0}"#)
        }
    }
}

/// A step's refusal, carrying the answer to give.
public struct PushRefusal: Error, Equatable {
    /// The answer to give.
    public let answer: PushAnswer
    /// A refusal answered with `answer`.
    public init(_ answer: PushAnswer) { self.answer = answer }
}

extension UInt8 {
    var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
}
