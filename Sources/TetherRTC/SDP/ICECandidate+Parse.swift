import TetherNet

extension ICECandidate {
    /// Why a candidate attribute was refused. Most cases break RFC 8839's grammar; the
    /// `isUnusable` ones are well formed but name something Tether's agent cannot use, so a
    /// receiver skips that candidate and keeps the call.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The grammar's productions, named as RFC 8839 §5.1 and RFC 6544 §4.5 name them.
        public enum Field: String, Sendable {
            case foundation, componentID = "component-id", transport, priority, connectionAddress = "connection-address", port
            case candidateType = "cand-type", relatedAddress = "rel-addr", relatedPort = "rel-port", tcpType = "tcptype"
            case candidateExtension = "cand-extension"
        }

        /// Not `candidate:` followed by the fields (an end-of-candidates marker is this too).
        case notACandidate
        /// A field is missing or does not match its production.
        case invalid(Field)
        /// A TCP candidate without `tcptype`, which RFC 6544 §4.5 requires.
        case missingTCPType
        /// `tcptype` on a UDP candidate.
        case tcpTypeOnUDP
        /// A `transport-extension` other than TCP.
        case unsupportedTransport(String)
        /// A `cand-type` token other than host, srflx, prflx and relay.
        case unsupportedType(String)
        /// A hostname (an mDNS `.local` name, say) rather than an IP literal: Tether resolves
        /// neither DNS nor mDNS on the ICE path, so such a candidate could never be paired.
        case unresolvableAddress(String)

        /// Well formed but of no use to Tether: skip the candidate, do not fail the call.
        public var isUnusable: Bool {
            switch self {
            case .unsupportedTransport, .unsupportedType, .unresolvableAddress: true
            default: false
            }
        }

        public var description: String {
            switch self {
            case .notACandidate: "not a candidate attribute"
            case let .invalid(field): "candidate \(field.rawValue) is missing or malformed"
            case .missingTCPType: "TCP candidate without tcptype"
            case .tcpTypeOnUDP: "tcptype on a UDP candidate"
            case let .unsupportedTransport(name): "candidate transport \(name.prefix(32)) is not supported"
            case let .unsupportedType(name): "candidate type \(name.prefix(32)) is not supported"
            case let .unresolvableAddress(name): "candidate address \(name.prefix(64)) is a hostname Tether cannot resolve"
            }
        }
    }

    /// Parses `candidate:<foundation> <component-id> <transport> <priority> <connection-address>
    /// <port> typ <cand-type> [raddr <rel-addr>] [rport <rel-port>] *(<name> <value>)`, the
    /// attribute without its `a=`. Keywords match in any case (ABNF literals are
    /// case-insensitive); fields are separated by exactly one space.
    public static func parse(_ value: String) throws(ParseError) -> ICECandidate {
        let prefix = "candidate:"
        guard value.utf8.count > prefix.utf8.count, value.prefix(prefix.count).lowercased() == prefix else { throw .notACandidate }
        guard let fields = SDPGrammar.fields(value.dropFirst(prefix.count)), fields.count >= 8 else { throw .notACandidate }

        guard SDPGrammar.isICEString(fields[0], length: 1...32) else { throw .invalid(.foundation) }
        // component-id is 1*3DIGIT; RFC 8445 §5.1.1.1 numbers components from 1 to 256.
        guard let component = SDPGrammar.number(fields[1], maxDigits: 3, as: UInt16.self), (1...256).contains(component) else {
            throw .invalid(.componentID)
        }
        guard SDPGrammar.isToken(fields[2]) else { throw .invalid(.transport) }
        guard let transport = Transport(rawValue: fields[2].lowercased()) else { throw .unsupportedTransport(String(fields[2])) }
        guard let priority = SDPGrammar.number(fields[3], maxDigits: 10, as: UInt32.self) else { throw .invalid(.priority) }
        let address = try connectionAddress(fields[4], field: .connectionAddress)
        guard let port = SDPGrammar.port(fields[5]) else { throw .invalid(.port) }
        guard fields[6].lowercased() == "typ", SDPGrammar.isToken(fields[7]) else { throw .invalid(.candidateType) }
        guard let type = CandidateType(rawValue: fields[7].lowercased()) else { throw .unsupportedType(String(fields[7])) }

        var candidate = ICECandidate(foundation: String(fields[0]), componentID: Int(component), transport: transport, priority: priority,
                                     connectionAddress: address, port: port, type: type)
        var index = 8
        func keyword(_ name: String) -> Bool { index < fields.count && fields[index].lowercased() == name }
        if keyword("raddr") {
            guard index + 1 < fields.count else { throw .invalid(.relatedAddress) }
            candidate.relatedAddress = try connectionAddress(fields[index + 1], field: .relatedAddress)
            index += 2
        }
        if keyword("rport") {
            guard index + 1 < fields.count, let port = SDPGrammar.port(fields[index + 1]) else { throw .invalid(.relatedPort) }
            candidate.relatedPort = port
            index += 2
        }
        // What follows is name-value pairs; tcptype is one of them (RFC 6544 §4.5), the others
        // are kept as they came.
        while index < fields.count {
            guard index + 1 < fields.count, SDPGrammar.isToken(fields[index]), SDPGrammar.isVisible(fields[index + 1]) else {
                throw .invalid(.candidateExtension)
            }
            let name = fields[index].lowercased(), value = fields[index + 1]
            switch name {
            case "tcptype":
                guard candidate.tcpType == nil, let tcpType = TCPType(rawValue: value.lowercased()) else { throw .invalid(.tcpType) }
                candidate.tcpType = tcpType
            case "raddr", "rport", "typ":
                // Out of place or repeated: a second reading of these would be ambiguous.
                throw .invalid(.candidateExtension)
            default:
                candidate.extensions.append(Extension(name: String(fields[index]), value: String(value)))
            }
            index += 2
        }
        switch (transport, candidate.tcpType) {
        case (.tcp, nil): throw .missingTCPType
        case (.udp, .some): throw .tcpTypeOnUDP
        default: return candidate
        }
    }

    /// An IPv4 or IPv6 literal as written; a hostname is unusable, anything else malformed.
    private static func connectionAddress(_ text: Substring, field: ParseError.Field) throws(ParseError) -> String {
        let address = String(text)
        if (try? SocketAddress(host: address, port: 0)) != nil { return address }
        throw isHostname(text) ? .unresolvableAddress(address) : .invalid(field)
    }

    /// RFC 1123 labels joined by dots (a trailing dot allowed), the last not all digits so a
    /// mistyped IPv4 address stays malformed: what an FQDN or an mDNS name (`<uuid>.local`)
    /// looks like.
    private static func isHostname(_ text: Substring) -> Bool {
        let name = text.hasSuffix(".") ? text.dropLast() : text
        guard (1...253).contains(name.utf8.count) else { return false }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard let last = labels.last, !last.utf8.allSatisfy(SDPGrammar.isDigit) else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { SDPGrammar.isAlpha($0) || SDPGrammar.isDigit($0) || $0 == UInt8(ascii: "-") }
        }
    }
}
