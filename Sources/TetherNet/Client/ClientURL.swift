import Foundation

/// The parts of an http(s)/ws(s) URL a client needs.
public struct ClientURL: Sendable, Hashable {
    public let secure: Bool
    public let host: String
    public let port: UInt16
    /// Path and query, at least "/".
    public let target: String

    public init(_ text: String) throws(NetError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty else { throw .invalidAddress(text) }
        switch scheme {
        case "http", "ws": secure = false
        case "https", "wss": secure = true
        default: throw .invalidAddress(text)
        }
        guard components.user == nil, components.password == nil else { throw .invalidAddress(text) }
        // An IPv6 literal comes back bracketed.
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        port = UInt16(components.port ?? (secure ? 443 : 80))
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        target = path + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    /// The Host header value.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }
}
