public import TetherEncoding
/// What a client sends the signaling server (signaling.md §5.2, §5.4, §5.5), read as strictly
/// as §2 and §13.1 say. Reading happens in two steps because the server answers by state: first
/// the type (`classify`: not a JSON object with a known client type is `bad_message`), then the
/// type's own fields, which a client that is not registered yet never gets checked.
public enum SignalingClientMessage {
    public enum MessageType: String, Sendable {
        case register, signal, presence
    }

    /// The JSON object and its client type, or nil (`bad_message`): not UTF-8 JSON, not an
    /// object, a duplicate key, no `type` or one a client does not send.
    public static func classify(_ bytes: [UInt8]) -> (type: MessageType, fields: [String: JSONValue])? {
        guard case let .object(fields)? = JSONValue.parseStrict(bytes), case let .string(name)? = fields["type"],
              let type = MessageType(rawValue: name) else { return nil }
        return (type, fields)
    }

    /// `"v":2` exactly: the integer 2 (not `2.0`, `"2"` or `true`).
    static func hasVersion2(_ fields: [String: JSONValue]) -> Bool {
        if case let .number(v)? = fields["v"], v == 2 { return true }
        return false
    }

    /// A field holding b64std (§2, canonical per §13.1) of exactly `count` bytes, or nil.
    static func base64(_ fields: [String: JSONValue], _ key: String, count: Int) -> [UInt8]? {
        guard case let .string(text)? = fields[key], text.utf8.count == (count + 2) / 3 * 4,
              let bytes = try? Base64.decodeCanonical(text), bytes.count == count else { return nil }
        return bytes
    }

    static func id(_ fields: [String: JSONValue], _ key: String) -> SignalingID? {
        guard case let .string(text)? = fields[key] else { return nil }
        return SignalingID(canonical: text)
    }
}

/// `register` (§5.2).
public struct RegisterMessage: Sendable, Equatable {
    public let id: SignalingID
    public let signature: [UInt8]

    public init(id: SignalingID, signature: [UInt8]) {
        self.id = id
        self.signature = signature
    }

    /// nil: `bad_message` (wrong `v`, an `id` not canonical, a `sig` that is not b64std of 64 bytes).
    public static func parse(_ fields: [String: JSONValue]) -> RegisterMessage? {
        typealias M = SignalingClientMessage
        guard M.hasVersion2(fields), let id = M.id(fields, "id"), let signature = M.base64(fields, "sig", count: 64) else { return nil }
        return RegisterMessage(id: id, signature: signature)
    }

    public func json() -> String {
        #"{"type":"register","v":2,"id":"\#(id.canonical)","sig":"\#(Base64.encode(signature))"}"#
    }
}

/// `presence` from a client (§5.5): 1–16 distinct canonical IDs.
public struct PresenceQuery: Sendable, Equatable {
    public static let maxIDs = 16
    public let ids: [SignalingID]

    public init(ids: [SignalingID]) { self.ids = ids }

    /// nil: `bad_message` (wrong `v`, no `ids` array, empty, more than 16, a repeat, a
    /// non-canonical ID).
    public static func parse(_ fields: [String: JSONValue]) -> PresenceQuery? {
        guard SignalingClientMessage.hasVersion2(fields), case let .array(items)? = fields["ids"],
              (1...maxIDs).contains(items.count) else { return nil }
        var ids: [SignalingID] = []
        ids.reserveCapacity(items.count)
        for item in items {
            guard case let .string(text) = item, let id = SignalingID(canonical: text), !ids.contains(id) else { return nil }
            ids.append(id)
        }
        return PresenceQuery(ids: ids)
    }

    public func json() -> String {
        #"{"type":"presence","v":2,"ids":["# + ids.map { "\"\($0.canonical)\"" }.joined(separator: ",") + "]}"
    }
}
