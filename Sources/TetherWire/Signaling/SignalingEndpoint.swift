import Glibc
import TetherEncoding

/// A signaling server's URL as a client may use it (signaling.md §3.5): `wss://HOST[:PORT]/signal`
/// with nothing else, or `ws://` to a loopback host where the caller allows it (debug builds and
/// integration tests; never a release client's default).
///
/// The text is parsed byte by byte here rather than by Foundation's URL types: those accept
/// (and silently repair) much of what §3.5 refuses, and an endpoint reached from a link someone
/// sent must be refused exactly when the rules say so.
public struct SignalingEndpoint: Sendable, Hashable, CustomStringConvertible {
    public static let path = "/signal"

    /// The canonical URL: lowercase scheme and host, an IPv6 address in its RFC 5952 form in
    /// brackets, an explicit port kept (even 443), then `/signal`.
    public let url: String
    /// `wss://`; false only for a loopback `ws://` endpoint the caller allowed.
    public let isSecure: Bool
    /// Lowercase; an IPv6 address without its brackets.
    public let host: String
    /// The explicit port, if the URL has one.
    public let port: UInt16?

    /// `127.0.0.1`, `::1` or `localhost` (§3.5 names exactly these).
    public var isLoopback: Bool { Self.loopbackHosts.contains(host) }

    static let loopbackHosts: Set<String> = ["127.0.0.1", "::1", "localhost"]

    /// Validates `text` against §3.5; the first rule it breaks, in the order scheme, authority
    /// (credentials, host, port), path, query, fragment, is the error. Nothing is trimmed.
    public init(_ text: String, allowLoopbackWS: Bool = false) throws(SignalingEndpointError) {
        let bytes = Array(text.utf8)
        guard bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { throw .invalidCharacter }

        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: Array("://".utf8)) else { throw .scheme }
        let scheme = String(decoding: bytes[..<colon].map(Self.lowercased), as: UTF8.self)
        switch scheme {
        case "wss": isSecure = true
        case "ws":
            guard allowLoopbackWS else { throw .plaintext }
            isSecure = false
        default: throw .scheme
        }

        let rest = bytes[(colon + 3)...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let (host, isIPv6, port) = try Self.authority(rest[rest.startIndex..<authorityEnd])
        self.host = host
        self.port = port
        if !isSecure, !Self.loopbackHosts.contains(host) { throw .plaintextToRemoteHost }

        let pathEnd = rest[authorityEnd...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        // Byte for byte: `/Signal`, `/signal/` and `/%73ignal` name other resources to a server.
        guard rest[authorityEnd..<pathEnd].elementsEqual(Self.path.utf8) else { throw .path }
        // An empty query (a bare `?`) is still a query, as the server counts it (§13.1).
        if pathEnd < rest.endIndex, rest[pathEnd] == UInt8(ascii: "?") { throw .query }
        if pathEnd < rest.endIndex { throw .fragment }

        url = (isSecure ? "wss://" : "ws://") + (isIPv6 ? "[\(host)]" : host) + (port.map { ":\($0)" } ?? "") + Self.path
    }

    public var description: String { url }

    // MARK: - Authority

    private static func authority(_ authority: ArraySlice<UInt8>) throws(SignalingEndpointError) -> (host: String, isIPv6: Bool, port: UInt16?) {
        if authority.contains(UInt8(ascii: "@")) { throw .credentials }
        let hostText: ArraySlice<UInt8>
        let portText: ArraySlice<UInt8>?
        let isIPv6 = authority.first == UInt8(ascii: "[")
        if isIPv6 {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .host }
            hostText = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if after.isEmpty {
                portText = nil
            } else {
                guard after.first == UInt8(ascii: ":") else { throw .host }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostText = authority[..<colon]
            portText = authority[(colon + 1)...]
        } else {
            hostText = authority
            portText = nil
        }
        let host = isIPv6 ? try ipv6(hostText) : try registeredName(hostText)
        guard let portText else { return (host, isIPv6, nil) }
        return (host, isIPv6, try port(portText))
    }

    /// 1–65535 in decimal. An empty port (`host:`) is refused though RFC 3986 allows it: it
    /// means nothing a person would have meant to type.
    private static func port(_ text: ArraySlice<UInt8>) throws(SignalingEndpointError) -> UInt16 {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ (0x30...0x39).contains($0) }),
              let value = UInt16(String(decoding: text, as: UTF8.self)), value > 0 else { throw .port }
        return value
    }

    /// A bracketed IPv6 address in RFC 5952 form. A zone (`%25eth0`) or an IPvFuture literal is
    /// refused: neither names one server for every device that reads the link.
    private static func ipv6(_ text: ArraySlice<UInt8>) throws(SignalingEndpointError) -> String {
        guard !text.isEmpty, text.allSatisfy({ Hex.value(of: $0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { throw .host }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(decoding: text, as: UTF8.self), &address) == 1 else { throw .host }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { throw .host }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A DNS name (letters, digits, hyphens; labels of 1–63 characters, 253 in all) or a dotted
    /// IPv4 address, lowercased. A name whose last label is numeric must be a strict dotted quad:
    /// WHATWG URL parsers (browsers, many WebSocket clients) read `127.1`, `0x7f.0.0.1` or
    /// `2130706433` as IPv4 addresses, so such a host would reach a server other than the one
    /// the text seems to name.
    private static func registeredName(_ text: ArraySlice<UInt8>) throws(SignalingEndpointError) -> String {
        let lower = text.map(lowercased)
        guard !lower.isEmpty, lower.count <= 253 else { throw .host }
        let labels = lower.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        for label in labels {
            guard (1...63).contains(label.count),
                  label.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") }),
                  label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-") else { throw .host }
        }
        let last = labels[labels.count - 1]
        let looksNumeric = last.allSatisfy { (0x30...0x39).contains($0) } || last.starts(with: Array("0x".utf8))
        if looksNumeric {
            guard labels.count == 4, labels.allSatisfy({ label in
                label.allSatisfy { (0x30...0x39).contains($0) } && label.count <= 3
                    && (label.count == 1 || label.first != UInt8(ascii: "0"))
                    && Int(String(decoding: label, as: UTF8.self))! <= 255
            }) else { throw .host }
        }
        return String(decoding: lower, as: UTF8.self)
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 { (0x41...0x5A).contains(byte) ? byte + 0x20 : byte }
}

/// Why a signaling endpoint URL was refused (signaling.md §3.5).
public enum SignalingEndpointError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A space, a control character or a non-ASCII character (an international host name must
    /// be given in its `xn--` form).
    case invalidCharacter
    /// Not `wss://` (nor `ws://`).
    case scheme
    /// `ws://` where only `wss://` is allowed.
    case plaintext
    /// `ws://` to a host other than 127.0.0.1, ::1 or localhost.
    case plaintextToRemoteHost
    /// A user name or password (`user@`, `user:pass@`).
    case credentials
    case host
    case port
    case path
    /// Anything after `?`, even nothing.
    case query
    case fragment

    public var description: String {
        switch self {
        case .invalidCharacter: "the signaling endpoint has a space, control or non-ASCII character (write international host names as xn--…)"
        case .scheme: "the signaling endpoint must be wss://HOST[:PORT]/signal"
        case .plaintext: "the signaling endpoint must use wss:// (ws:// is unencrypted)"
        case .plaintextToRemoteHost: "ws:// is allowed only to a loopback host (127.0.0.1, [::1], localhost); use wss://"
        case .credentials: "the signaling endpoint must not carry a user name or password"
        case .host: "the signaling endpoint's host is missing or malformed"
        case .port: "the signaling endpoint's port must be a number from 1 to 65535"
        case .path: "the signaling endpoint's path must be exactly /signal"
        case .query: "the signaling endpoint must have no query (nothing after ?)"
        case .fragment: "the signaling endpoint must have no fragment (nothing after #)"
        }
    }
}
