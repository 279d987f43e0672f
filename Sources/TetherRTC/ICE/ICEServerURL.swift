/// One URL of an `ICEServer` (RFC 7064 `stun:`/`stuns:`, RFC 7065 `turn:`/`turns:`), read strictly:
/// `scheme:host[:port][?transport=udp|tcp]`, the query only on TURN URLs, IPv6 literals in brackets.
/// libnice reaches a TURN server over UDP, TCP or TLS, so `turns:` means TLS over TCP; what it
/// cannot do (STUN over TLS, TURN over DTLS) is refused as `unsupported`, apart from malformed.
public struct ICEServerURL: Sendable, Hashable {
    public enum Scheme: String, Sendable {
        case stun, turn, turns
    }

    /// How a TURN client reaches the server (the relayed addresses themselves are UDP either way).
    public enum RelayTransport: Sendable, Hashable {
        case udp, tcp, tls
    }

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Not `scheme:host[:port][?transport=…]`, or a port outside 1…65535.
        case malformed
        /// Well formed, but not something libnice can use (`stuns:`, TURN over DTLS, another transport).
        case unsupported(String)

        public var description: String {
            switch self {
            case .malformed: "ICE server URL is malformed"
            case let .unsupported(what): "ICE server URL is not supported: \(what)"
            }
        }
    }

    public let scheme: Scheme
    /// A host name or an IP literal (without brackets).
    public let host: String
    public let port: UInt16
    /// nil for `stun:`.
    public let relayTransport: RelayTransport?

    /// RFC 7064/7065's defaults: 3478, and 5349 over TLS.
    static func defaultPort(_ scheme: Scheme) -> UInt16 { scheme == .turns ? 5349 : 3478 }

    public static func parse(_ text: String) throws(ParseError) -> ICEServerURL {
        // Long enough for any host name (253) with a port and the query; longer is not a URL we sent.
        guard text.utf8.count <= 300, let colon = text.firstIndex(of: ":") else { throw .malformed }
        let schemeName = text[..<colon].lowercased()
        if schemeName == "stuns" { throw .unsupported("STUN over TLS") }
        guard let scheme = Scheme(rawValue: schemeName) else { throw .malformed }
        var rest = text[text.index(after: colon)...]
        var transport: Substring?
        if let question = rest.firstIndex(of: "?") {
            guard scheme != .stun else { throw .malformed }
            let query = rest[rest.index(after: question)...]
            let prefix = "transport="
            guard query.lowercased().hasPrefix(prefix) else { throw .malformed }
            transport = query.dropFirst(prefix.count)
            rest = rest[..<question]
        }
        let (host, port) = try hostAndPort(rest, default: defaultPort(scheme))
        let relay: RelayTransport?
        switch (scheme, transport?.lowercased()) {
        case (.stun, _): relay = nil
        case (.turn, nil), (.turn, "udp"): relay = .udp
        case (.turn, "tcp"): relay = .tcp
        case (.turns, nil), (.turns, "tcp"): relay = .tls
        case (.turns, "udp"): throw .unsupported("TURN over DTLS")
        case let (_, other?):
            guard !other.isEmpty, other.utf8.allSatisfy(isTokenCharacter) else { throw .malformed }
            throw .unsupported("transport \(other.prefix(16))")
        }
        return ICEServerURL(scheme: scheme, host: host, port: port, relayTransport: relay)
    }

    private static func hostAndPort(_ text: Substring, default defaultPort: UInt16) throws(ParseError) -> (String, UInt16) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .malformed }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .malformed }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.utf8.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { throw .malformed }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw .malformed }
            host = parts[0]
            if parts.count == 2 { portText = parts[1] }
            guard !host.isEmpty, host.utf8.count <= 253, host.utf8.allSatisfy(isHostCharacter) else { throw .malformed }
        }
        guard let portText else { return (String(host), defaultPort) }
        guard (1...5).contains(portText.utf8.count), portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let port = UInt16(portText), port != 0 else { throw .malformed }
        return (String(host), port)
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c | 0x20 >= UInt8(ascii: "a") && c | 0x20 <= UInt8(ascii: "f"))
    }

    /// RFC 3986 reg-name without percent-encoding, which no TURN host name needs.
    private static func isHostCharacter(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: "_")
    }

    private static func isTokenCharacter(_ c: UInt8) -> Bool {
        isHostCharacter(c) || c == UInt8(ascii: "+")
    }
}
