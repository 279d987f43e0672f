/// A parsed HTTP/1.x request line and header section.
public struct HTTPRequestHead: Sendable, Hashable {
    public var method: String
    /// The request-target exactly as sent (origin form: path and query).
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    public init(method: String, target: String, version: HTTPVersion = .http11, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The path: the target up to `?`.
    public var path: Substring { target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }

    /// Whether the connection stays open after this exchange (RFC 9112 §9.3).
    public var keepAlive: Bool {
        if headers.containsToken("close", in: "Connection") { return false }
        if version == .http11 { return true }
        return headers.containsToken("keep-alive", in: "Connection")
    }

    /// True for a WebSocket upgrade attempt (`Upgrade: websocket`).
    public var isWebSocketUpgrade: Bool { headers.containsToken("websocket", in: "Upgrade") }

    /// The head on the wire again (request line, fields in their order, blank line), for passing
    /// a request on: the parser admitted every name and value, so each is written as it came.
    public func serialized() -> [UInt8] {
        var text = "\(method) \(target) \(version)\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }
}

public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public let major: Int
    public let minor: Int
    public static let http10 = HTTPVersion(major: 1, minor: 0)
    public static let http11 = HTTPVersion(major: 1, minor: 1)
    public var description: String { "HTTP/\(major).\(minor)" }
}
