import TetherEncoding
/// What the signaling server sends (signaling.md §5.1, §5.3–§5.6): always a text frame holding
/// one JSON object. Encoders for the server; `parse` for clients.
public enum SignalingServerMessage: Sendable, Equatable {
    case challenge(String)
    case registered(id: SignalingID, iceServers: [ICEServer], iceExpiresAt: Int64)
    case signal(SignalMessage)
    /// The answer to a presence query, in the order asked.
    case presence([(id: SignalingID, online: Bool)])
    case error(code: String, message: String, call: CallUUID?, kind: SignalKind?)

    public static func == (lhs: SignalingServerMessage, rhs: SignalingServerMessage) -> Bool {
        switch (lhs, rhs) {
        case let (.challenge(a), .challenge(b)): a == b
        case let (.registered(a, b, c), .registered(d, e, f)): a == d && b == e && c == f
        case let (.signal(a), .signal(b)): a == b
        case let (.presence(a), .presence(b)): a.map(\.id) == b.map(\.id) && a.map(\.online) == b.map(\.online)
        case let (.error(a, b, c, d), .error(e, f, g, h)): a == e && b == f && c == g && d == h
        default: false
        }
    }

    public func json() -> String {
        switch self {
        case let .challenge(challenge):
            return #"{"type":"challenge","v":2,"challenge":"\#(challenge)"}"#
        case let .registered(id, servers, expiresAt):
            return #"{"type":"registered","v":2,"id":"\#(id.canonical)","iceServers":\#(ICEServer.json(servers)),"iceExpiresAt":\#(expiresAt)}"#
        case let .signal(signal):
            return signal.json()
        case let .presence(answers):
            return #"{"type":"presence","v":2,"online":{"# + answers.map { "\"\($0.id.canonical)\":\($0.online)" }.joined(separator: ",") + "}}"
        case let .error(code, message, call, kind):
            var text = #"{"type":"error","v":2,"code":"\#(code)","message":"# + JSONValue.quoted(message)
            if let call { text += #","call":"\#(call.text)""# }
            if let kind { text += #","kind":"\#(kind.rawValue)""# }
            return text + "}"
        }
    }

    public static func error(_ code: SignalingErrorCode, call: CallUUID? = nil, kind: SignalKind? = nil) -> SignalingServerMessage {
        .error(code: code.rawValue, message: code.defaultMessage, call: call, kind: kind)
    }

    /// Reads a server message (clients); nil when it is not one.
    public static func parse(_ bytes: [UInt8]) -> SignalingServerMessage? {
        guard case let .object(fields)? = JSONValue.parseStrict(bytes), SignalingClientMessage.hasVersion2(fields),
              case let .string(type)? = fields["type"] else { return nil }
        switch type {
        case "challenge":
            guard case let .string(text)? = fields["challenge"], SignalingClientMessage.base64(fields, "challenge", count: 32) != nil else { return nil }
            return .challenge(text)
        case "registered":
            guard let id = SignalingClientMessage.id(fields, "id"), case let .array(items)? = fields["iceServers"],
                  let expiresAt = JSONValue.object(fields).integer("iceExpiresAt") else { return nil }
            var servers: [ICEServer] = []
            for item in items {
                guard let server = ICEServer.parse(item) else { return nil }
                servers.append(server)
            }
            return .registered(id: id, iceServers: servers, iceExpiresAt: expiresAt)
        case "signal":
            guard case let .success(signal) = SignalMessage.parse(fields) else { return nil }
            return .signal(signal)
        case "presence":
            guard case let .object(online)? = fields["online"] else { return nil }
            var answers: [(id: SignalingID, online: Bool)] = []
            for (key, value) in online {
                guard let id = SignalingID(canonical: key), case let .bool(flag) = value else { return nil }
                answers.append((id, flag))
            }
            return .presence(answers.sorted { $0.id < $1.id })
        case "error":
            guard case let .string(code)? = fields["code"], case let .string(message)? = fields["message"] else { return nil }
            var call: CallUUID?
            if case let .string(text)? = fields["call"] { call = CallUUID(text) }
            var kind: SignalKind?
            if case let .string(text)? = fields["kind"] { kind = SignalKind(rawValue: text) }
            return .error(code: code, message: message, call: call, kind: kind)
        default:
            return nil
        }
    }
}
