import TetherEncoding
/// The Mac's verdict on a fresh pairing (client.md §11): the first application frame, bare (not
/// an envelope), exactly `{"pairing":"accepted"}` or `{"pairing":"rejected"}`.
public enum PairingVerdict: Sendable, Equatable {
    case accepted
    case rejected

    public var frame: [UInt8] {
        switch self {
        case .accepted: Array(#"{"pairing":"accepted"}"#.utf8)
        case .rejected: Array(#"{"pairing":"rejected"}"#.utf8)
        }
    }

    /// Strict: a JSON object whose `pairing` is exactly `accepted` or `rejected`; anything else
    /// (empty, another key, an envelope, `maybe`) is nil — "not confirmed".
    public init?(frame: [UInt8]) {
        guard case let .object(fields)? = JSONValue.parse(frame), case let .string(value)? = fields["pairing"] else { return nil }
        switch value {
        case "accepted": self = .accepted
        case "rejected": self = .rejected
        default: return nil
        }
    }
}

/// The protocol revision these endpoints speak (client.md §12.5).
public enum CompanionRevision {
    public static let current = 11
    public static let minimumPeer = 11

    public enum Verdict: Sendable, Equatable { case compatible, upgradeSelf, upgradePeer }

    /// Both sides reach consistent verdicts from the two hellos.
    public static func compare(localRevision: Int = current, localMinimumPeer: Int = minimumPeer,
                               peerRevision: Int, peerMinimumPeer: Int) -> Verdict {
        if localRevision < peerMinimumPeer { return .upgradeSelf }
        if peerRevision < localMinimumPeer { return .upgradePeer }
        return .compatible
    }
}

/// A control message inside the Noise channel (client.md §12.2): `{"requestID":N,"payload":
/// {"<case>":{…}}}`, `requestID` omitted for fire-and-forget messages and events. Only the cases
/// the pairing and relay flows need are modelled; others decode as `unsupported`.
public struct CompanionEnvelope: Sendable, Equatable {
    public enum Payload: Sendable, Equatable {
        /// Phone → Mac on every connection: the 32-byte room secret (§12.4).
        case relayRoomSecret([UInt8])
        /// Mac → phone: the secret is stored.
        case relayRoomSecretStored
        case hello(revision: Int, minimumPeer: Int, wantsNotificationPermission: Bool?)
        case error(code: String, message: String)
        case ping, pong, unpairing, unpaired
        /// Phone → Mac, fire-and-forget: the phone's push registration (§12.6).
        case pushStatus(PushStatus)
        /// A case this side does not know (the Mac answers it with `error` `unsupported`).
        case unsupported(String)
    }

    public var requestID: UInt64?
    public var payload: Payload

    public init(requestID: UInt64? = nil, _ payload: Payload) {
        self.requestID = requestID
        self.payload = payload
    }

    /// The JSON text (Foundation `JSONEncoder` shapes: `_0` for an unlabelled value, `{}` for none).
    public var json: String {
        let body: String
        switch payload {
        case let .relayRoomSecret(secret): body = #""relayRoomSecret":{"_0":\#(Self.quote(Base64.encode(secret)))}"#
        case .relayRoomSecretStored: body = #""relayRoomSecretStored":{}"#
        case let .hello(revision, minimumPeer, wants):
            body = #""hello":{"revision":\#(revision),"minimumPeer":\#(minimumPeer)\#(wants.map { #","wantsNotificationPermission":\#($0)"# } ?? "")}"#
        case let .error(code, message): body = #""error":{"_0":{"code":\#(Self.quote(code)),"message":\#(Self.quote(message))}}"#
        case .ping: body = #""ping":{}"#
        case .pong: body = #""pong":{}"#
        case .unpairing: body = #""unpairing":{}"#
        case .unpaired: body = #""unpaired":{}"#
        case let .pushStatus(status):
            var fields = [#""authorization":\#(Self.quote(status.authorization.rawValue))"#]
            if let token = status.token { fields.append(#""token":\#(Self.quote(Base64.encode(token)))"#) }
            if let secret = status.relaySecret { fields.append(#""relaySecret":\#(Self.quote(Base64.encode(secret)))"#) }
            fields.append(#""sandbox":\#(status.sandbox)"#)
            body = #""pushStatus":{"# + fields.joined(separator: ",") + "}"
        case let .unsupported(name): body = "\(Self.quote(name)):{}"
        }
        return (requestID.map { #"{"requestID":\#($0),"# } ?? "{") + #""payload":{\#(body)}}"#
    }

    public var frame: [UInt8] { Array(json.utf8) }

    /// Decodes an envelope; nil for anything malformed (dropped, client.md §12.2). A known case
    /// with a malformed body is nil too; an unknown case name is `unsupported`.
    public init?(frame: [UInt8]) {
        guard case let .object(fields)? = JSONValue.parse(frame), case let .object(payload)? = fields["payload"],
              payload.count == 1, let (name, body) = payload.first else { return nil }
        if let id = fields["requestID"] {
            guard case let .number(value) = id, value >= 0, value < 0x1p53, value.rounded() == value else { return nil }
            requestID = UInt64(value)
        }
        guard case let .object(values) = body else { return nil }
        switch name {
        case "relayRoomSecret":
            guard case let .string(text)? = values["_0"], let secret = try? Base64.decode(text), secret.count == RoomSecret.byteCount else { return nil }
            self.payload = .relayRoomSecret(secret)
        case "relayRoomSecretStored": self.payload = .relayRoomSecretStored
        case "hello":
            // Integers, as the reference's Int fields decode them: `Int(_:)` trapped on 1e300.
            guard case let .number(revisionNumber)? = values["revision"], let revision = Int(exactly: revisionNumber),
                  case let .number(minimumNumber)? = values["minimumPeer"], let minimum = Int(exactly: minimumNumber) else { return nil }
            var wants: Bool?
            if case let .bool(flag)? = values["wantsNotificationPermission"] { wants = flag }
            self.payload = .hello(revision: revision, minimumPeer: minimum, wantsNotificationPermission: wants)
        case "error":
            guard case let .object(detail)? = values["_0"], case let .string(code)? = detail["code"], case let .string(message)? = detail["message"] else { return nil }
            self.payload = .error(code: code, message: message)
        case "ping": self.payload = .ping
        case "pong": self.payload = .pong
        case "unpairing": self.payload = .unpairing
        case "unpaired": self.payload = .unpaired
        case "pushStatus":
            // As the reference's Codable decodes it: `authorization` one of the three names and
            // `sandbox` a boolean, required; `token` and `relaySecret` optional base64 (`Data`),
            // absent or null. One it cannot decode is dropped as the reference drops it (an event
            // without a request id gets no error), never handed on as an application frame.
            func bytes(_ key: String) -> [UInt8]?? {
                guard let value = values[key], value != .null else { return .some(nil) }
                guard case let .string(text) = value, let decoded = try? Base64.decode(text) else { return nil }
                return .some(decoded)
            }
            guard case let .string(name)? = values["authorization"], let authorization = PushStatus.Authorization(rawValue: name),
                  case let .bool(sandbox)? = values["sandbox"], let token = bytes("token"), let relaySecret = bytes("relaySecret") else {
                self.payload = .unsupported(name)
                return
            }
            self.payload = .pushStatus(PushStatus(authorization: authorization, token: token, relaySecret: relaySecret, sandbox: sandbox))
        default: self.payload = .unsupported(name)
        }
    }

    /// A JSON string literal.
    static func quote(_ text: String) -> String { "\"" + JSONValue.escaped(text) + "\"" }
}

/// The phone's push state as it couriers it to the Mac in `pushStatus` (client.md §12.6,
/// push.md §3.3): notification permission, and, once registered with a Profile I relay, the APNs
/// token bytes and the 32-byte push secret whose hash the relay holds.
public struct PushStatus: Sendable, Equatable {
    public enum Authorization: String, Sendable {
        case notDetermined, denied, authorized
    }

    public var authorization: Authorization
    public var token: [UInt8]?
    public var relaySecret: [UInt8]?
    public var sandbox: Bool

    public init(authorization: Authorization, token: [UInt8]? = nil, relaySecret: [UInt8]? = nil, sandbox: Bool) {
        self.authorization = authorization
        self.token = token
        self.relaySecret = relaySecret
        self.sandbox = sandbox
    }

    /// What the Mac sends in `/push` and `/push/mutable` (push.md §3.3): the token and the secret
    /// as lowercase hex. Nil unless there is a token and the secret is exactly 32 bytes (anything
    /// else is ignored: no push could authenticate with it).
    public var relayCredentials: (token: String, secret: String)? {
        guard let token, !token.isEmpty, let relaySecret, relaySecret.count == 32 else { return nil }
        return (Hex.encode(token), Hex.encode(relaySecret))
    }
}

/// What a reassembled application frame is (client.md §12.1).
public enum CompanionFrameKind: Sendable, Equatable {
    /// An empty frame: dropped.
    case empty
    /// First byte 0x01: an iTerm2 media frame (not interpreted here).
    case media
    /// Anything else: a JSON control envelope (or, once on a fresh pairing, the verdict).
    case control

    public init(_ frame: [UInt8]) {
        guard let first = frame.first else { self = .empty; return }
        self = first == 0x01 ? .media : .control
    }
}
