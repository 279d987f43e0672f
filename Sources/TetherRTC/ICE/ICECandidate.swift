/// An ICE candidate as the SDP `candidate` attribute value (RFC 8839 §5.1), which is what
/// `candidate` signals carry (signaling.md §7.1: the value without `a=`):
/// `candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type>
/// [raddr <address>] [rport <port>] *(<name> <value>)`.
public struct ICECandidate: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case host
        case serverReflexive = "srflx"
        case peerReflexive = "prflx"
        case relayed = "relay"
    }

    public enum Transport: String, Sendable {
        case udp = "UDP"
        case tcp = "TCP"
    }

    public struct Extension: Sendable, Hashable {
        public let name: String
        public let value: String
    }

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Longer than any real candidate line (`maxLength`).
        case tooLong
        /// Does not start with `candidate:`.
        case notACandidate
        /// Fewer than the eight mandatory fields, or a field out of its grammar; names the field.
        case malformedField(String)
        /// A candidate type other than host, srflx, prflx and relay.
        case unknownType(String)
        /// A transport other than UDP and TCP.
        case unknownTransport(String)

        public var description: String {
            switch self {
            case .tooLong: "ICE candidate is longer than \(ICECandidate.maxLength) bytes"
            case .notACandidate: "ICE candidate does not start with candidate:"
            case let .malformedField(field): "ICE candidate has a malformed \(field)"
            case let .unknownType(type): "ICE candidate type \(type.prefix(16)) is unknown"
            case let .unknownTransport(transport): "ICE candidate transport \(transport.prefix(16)) is unknown"
            }
        }
    }

    /// Browsers' lines stay well under 300 bytes even with every extension; this bounds what one
    /// signal can make the parser do.
    public static let maxLength = 1024

    public var foundation: String
    public var component: Int
    public var transport: Transport
    public var priority: UInt32
    /// An IP literal or, for mDNS-obfuscated host candidates, a host name.
    public var address: String
    public var port: UInt16
    public var kind: Kind
    public var relatedAddress: String?
    public var relatedPort: UInt16?
    public var extensions: [Extension]

    public init(foundation: String, component: Int, transport: Transport, priority: UInt32, address: String, port: UInt16, kind: Kind,
                relatedAddress: String? = nil, relatedPort: UInt16? = nil, extensions: [Extension] = []) {
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.kind = kind
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.extensions = extensions
    }

    /// Whether `address` is an IPv4 or IPv6 literal (libnice cannot use a host name, such as a
    /// browser's mDNS `….local` name, without resolving it first).
    public var hasIPAddress: Bool { IPLiteral.isValid(address) }

    public static func parse(_ value: String) throws(ParseError) -> ICECandidate {
        guard value.utf8.count <= maxLength else { throw .tooLong }
        let prefix = "candidate:"
        guard value.hasPrefix(prefix) else { throw .notACandidate }
        let fields = value.dropFirst(prefix.count).split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 8 else { throw .malformedField("field count") }
        let foundation = fields[0]
        guard (1...32).contains(foundation.utf8.count), foundation.utf8.allSatisfy(isICECharacter) else { throw .malformedField("foundation") }
        guard let component = digits(fields[1], max: 3).flatMap({ Int($0) }), (1...256).contains(component) else { throw .malformedField("component") }
        guard let transport = Transport(rawValue: fields[2].uppercased()) else {
            guard isToken(fields[2]) else { throw .malformedField("transport") }
            throw .unknownTransport(String(fields[2]))
        }
        guard let priority = digits(fields[3], max: 10).flatMap({ UInt32($0) }) else { throw .malformedField("priority") }
        let address = try connectionAddress(fields[4], field: "address")
        let port = try port(fields[5], field: "port")
        guard fields[6] == "typ" else { throw .malformedField("typ") }
        guard let kind = Kind(rawValue: String(fields[7])) else {
            guard isToken(fields[7]) else { throw .malformedField("type") }
            throw .unknownType(String(fields[7]))
        }
        var candidate = ICECandidate(foundation: String(foundation), component: component, transport: transport, priority: priority,
                                     address: address, port: port, kind: kind)
        var index = 8
        if index + 1 < fields.count, fields[index] == "raddr" {
            candidate.relatedAddress = try connectionAddress(fields[index + 1], field: "raddr")
            index += 2
        }
        if index + 1 < fields.count, fields[index] == "rport" {
            candidate.relatedPort = try self.port(fields[index + 1], field: "rport")
            index += 2
        }
        guard (fields.count - index) % 2 == 0 else { throw .malformedField("extension") }
        while index < fields.count {
            let name = fields[index], value = fields[index + 1]
            guard isToken(name), name != "raddr", name != "rport", !value.isEmpty,
                  value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { throw .malformedField("extension") }
            candidate.extensions.append(Extension(name: String(name), value: String(value)))
            index += 2
        }
        return candidate
    }

    /// The attribute value, `candidate:…`.
    public var value: String {
        var text = "candidate:\(foundation) \(component) \(transport.rawValue) \(priority) \(address) \(port) typ \(kind.rawValue)"
        if let relatedAddress { text += " raddr \(relatedAddress)" }
        if let relatedPort { text += " rport \(relatedPort)" }
        for item in extensions { text += " \(item.name) \(item.value)" }
        return text
    }

    public var description: String { value }

    private static func digits(_ text: Substring, max: Int) -> Substring? {
        guard (1...max).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return text
    }

    private static func port(_ text: Substring, field: String) throws(ParseError) -> UInt16 {
        guard let port = digits(text, max: 5).flatMap({ UInt16($0) }) else { throw .malformedField(field) }
        return port
    }

    /// An IP literal, or a host name of RFC 1123 letters, digits, hyphens and dots.
    private static func connectionAddress(_ text: Substring, field: String) throws(ParseError) -> String {
        let address = String(text)
        if IPLiteral.isValid(address) { return address }
        guard (1...253).contains(text.utf8.count), text.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }),
              text.utf8.contains(where: { !($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) && $0 != UInt8(ascii: ".") }) else {
            throw .malformedField(field)
        }
        return address
    }

    private static func isAlphanumeric(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }

    /// RFC 8839 ice-char: ALPHA / DIGIT / "+" / "/".
    static func isICECharacter(_ c: UInt8) -> Bool {
        isAlphanumeric(c) || c == UInt8(ascii: "+") || c == UInt8(ascii: "/")
    }

    /// RFC 4566 token characters.
    private static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { c in
            c > 0x20 && c < 0x7f && !"\"(),/:;<=>?@[\\]{}".utf8.contains(c)
        }
    }
}
