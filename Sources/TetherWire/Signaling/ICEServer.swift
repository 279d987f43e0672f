public import TetherEncoding
/// One WebRTC `RTCIceServer` as delivered in `registered` (signaling.md §8.4): STUN entries carry
/// only URLs; TURN entries also the username and credential. At most 4 URLs per entry.
public struct ICEServer: Sendable, Equatable {
    public static let maxURLsPerEntry = 4

    public var urls: [String]
    public var username: String?
    public var credential: String?

    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls
        self.username = username
        self.credential = credential
    }

    /// Splits `urls` in order into consecutive entries of at most 4, each with the same
    /// username and credential (§8.3 "Splitting"): no URL is ever dropped, so every TLS/TCP
    /// fallback survives.
    public static func split(urls: [String], username: String? = nil, credential: String? = nil) -> [ICEServer] {
        stride(from: 0, to: urls.count, by: maxURLsPerEntry).map {
            ICEServer(urls: Array(urls[$0..<min($0 + maxURLsPerEntry, urls.count)]), username: username, credential: credential)
        }
    }

    public func json() -> String {
        var text = #"{"urls":["# + urls.map(JSONValue.quoted).joined(separator: ",") + "]"
        if let username { text += #","username":"# + JSONValue.quoted(username) }
        if let credential { text += #","credential":"# + JSONValue.quoted(credential) }
        return text + "}"
    }

    public static func json(_ servers: [ICEServer]) -> String { "[" + servers.map { $0.json() }.joined(separator: ",") + "]" }

    /// One entry of a `registered` message (nil if it is not `{"urls":[strings…]}` with optional
    /// string `username` and `credential`).
    public static func parse(_ value: JSONValue) -> ICEServer? {
        guard case let .object(fields) = value, case let .array(items)? = fields["urls"] else { return nil }
        var urls: [String] = []
        for item in items {
            guard case let .string(url) = item else { return nil }
            urls.append(url)
        }
        var server = ICEServer(urls: urls)
        if let field = fields["username"] {
            guard case let .string(text) = field else { return nil }
            server.username = text
        }
        if let field = fields["credential"] {
            guard case let .string(text) = field else { return nil }
            server.credential = text
        }
        return server
    }
}
