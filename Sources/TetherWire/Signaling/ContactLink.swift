import TetherCrypto
import TetherEncoding

/// The contact link (signaling.md §3.4): `cryptext://contact/v2/<ID>[?relay=<endpoint>]`.
///
/// It holds no secret, and opening it proves nothing about who sent it. The relay it names is a
/// suggestion: a client shows it and uses it only after the user confirms (§3.4), so parsing
/// never applies it.
///
/// Spelling: the scheme matches in any case (RFC 3986 §3.1); `//contact/v2/` matches exactly,
/// as the app that routes on it compares it; the ID takes hex of either case and is
/// canonicalised. §3.1's typed-ID leniencies (`CT2-`, dashes, spaces) do not apply: §3.4 fixes
/// the segment as the canonical ID, so a link that differs is not one a client made.
public struct ContactLink: Sendable, Hashable {
    public static let prefix = "cryptext://contact/v2/"

    public let id: SignalingID
    public let relay: SignalingEndpoint?

    /// A link to `id`. The ID is not checked here: a link is made for one's own identity, whose
    /// key is a point by construction; `parse` checks every ID it reads.
    public init(id: SignalingID, relay: SignalingEndpoint? = nil) {
        self.id = id
        self.relay = relay
    }

    /// The link text.
    public var url: String {
        Self.prefix + id.canonical + (relay.map { "?relay=" + Self.percentEncode($0.url) } ?? "")
    }

    /// Reads a link as scanned or received: bytes that may not be UTF-8 (a QR code's payload).
    public static func parse(bytes: [UInt8], allowLoopbackWS: Bool = false) throws(ContactLinkError) -> ContactLink {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .notUTF8 }
        return try parse(text, allowLoopbackWS: allowLoopbackWS)
    }

    /// Validates every rule of §3.4 (and §3.5 for the relay); the first broken rule, reading the
    /// link from left to right, is the error. Nothing is trimmed: callers trim pasted text.
    /// `allowLoopbackWS` admits a `ws://` relay on a loopback host (debug builds, tests).
    public static func parse(_ text: String, allowLoopbackWS: Bool = false) throws(ContactLinkError) -> ContactLink {
        let bytes = Array(text.utf8)
        guard bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { throw .invalidCharacter }
        let scheme = Array("cryptext:".utf8), rest = Array("//contact/v2/".utf8)
        guard bytes.count >= scheme.count + rest.count,
              bytes[..<scheme.count].map({ (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }) == scheme,
              bytes[scheme.count...].starts(with: rest) else { throw .notAContactLink }
        let body = bytes[(scheme.count + rest.count)...]
        if body.contains(UInt8(ascii: "#")) { throw .fragment }
        let queryStart = body.firstIndex(of: UInt8(ascii: "?"))
        let id = try parseID(body[..<(queryStart ?? body.endIndex)])
        guard let queryStart else { return ContactLink(id: id) }
        return ContactLink(id: id, relay: try parseQuery(body[(queryStart + 1)...], allowLoopbackWS: allowLoopbackWS))
    }

    // MARK: - Parts

    private static func parseID(_ segment: ArraySlice<UInt8>) throws(ContactLinkError) -> SignalingID {
        if segment.contains(UInt8(ascii: "/")) { throw .notAContactLink }
        guard segment.allSatisfy({ Hex.value(of: $0) != nil }) else { throw .invalidID }
        if segment.count == 32 { throw .legacyID }
        guard segment.count == SignalingID.canonicalLength else { throw .invalidID }
        let id = SignalingID(canonical: String(decoding: segment.map { (0x61...0x66).contains($0) ? $0 - 0x20 : $0 }, as: UTF8.self))!
        // §3.1: an ID that is not a curve point can never be called; refusing the link keeps it
        // from being selected at all.
        guard Ed25519.isValidPublicKeyEncoding(id.key) else { throw .notAKey }
        return id
    }

    /// `relay=<value>` at most once, and nothing else.
    private static func parseQuery(_ query: ArraySlice<UInt8>, allowLoopbackWS: Bool) throws(ContactLinkError) -> SignalingEndpoint? {
        guard query.allSatisfy(isQueryByte) else { throw .invalidCharacter }
        var relay: SignalingEndpoint?
        for parameter in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            guard let equals = parameter.firstIndex(of: UInt8(ascii: "=")), equals > parameter.startIndex else { throw .malformedParameter }
            // Names are compared undecoded: `rel%61y` is not `relay`, as no builder writes it.
            let name = String(decoding: parameter[..<equals], as: UTF8.self)
            guard name == "relay" else { throw .unknownParameter(name) }
            guard relay == nil else { throw .duplicateRelay }
            guard let decoded = try String(validating: percentDecode(parameter[(equals + 1)...]), as: UTF8.self) else { throw .relayNotUTF8 }
            do throws(SignalingEndpointError) { relay = try SignalingEndpoint(decoded, allowLoopbackWS: allowLoopbackWS) } catch { throw .relay(error) }
        }
        return relay
    }

    /// RFC 3986 query characters: unreserved, sub-delims, `:`, `@`, `/`, `?` and `%` escapes.
    private static func isQueryByte(_ byte: UInt8) -> Bool {
        isUnescaped(byte) || Array("!$&'()*+,;=@?%".utf8).contains(byte)
    }

    /// The bytes §3.4 leaves unescaped in `relay`.
    private static func isUnescaped(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
            || Array("-._~:/".utf8).contains(byte)
    }

    /// Every byte but `A–Z a–z 0–9 - . _ ~ : /` as `%XX`, uppercase hex (§3.4).
    static func percentEncode(_ text: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            if isUnescaped(byte) { out.append(byte) } else { out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One pass: `%2573` becomes `%73`, not `s`. `+` is a plus sign (RFC 3986, not HTML forms).
    static func percentDecode(_ value: ArraySlice<UInt8>) throws(ContactLinkError) -> [UInt8] {
        var out: [UInt8] = []
        var index = value.startIndex
        while index < value.endIndex {
            if value[index] == UInt8(ascii: "%") {
                guard index + 2 < value.endIndex,
                      let high = Hex.value(of: value[index + 1]), let low = Hex.value(of: value[index + 2]) else { throw .percentEncoding }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(value[index])
                index += 1
            }
        }
        return out
    }
}

/// Why a contact link was refused (signaling.md §3.4).
public enum ContactLinkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The scanned bytes are not UTF-8.
    case notUTF8
    /// A space, a control or non-ASCII character, or one a URL query cannot hold.
    case invalidCharacter
    /// Not `cryptext://contact/v2/<ID>`.
    case notAContactLink
    /// 32 hex digits: a first-version label, which names no key.
    case legacyID
    case invalidID
    /// 64 hex digits that are not an Ed25519 public key (§3.1).
    case notAKey
    case fragment
    /// An empty parameter (`?`, `&&`) or one without `=`.
    case malformedParameter
    case unknownParameter(String)
    case duplicateRelay
    /// `%` not followed by two hex digits.
    case percentEncoding
    /// The decoded relay is not UTF-8.
    case relayNotUTF8
    /// The decoded relay breaks §3.5.
    case relay(SignalingEndpointError)

    public var description: String {
        switch self {
        case .notUTF8: "not a contact link: the text is not UTF-8"
        case .invalidCharacter: "not a contact link: it contains a character a link cannot hold (a space, a control character, non-ASCII text?)"
        case .notAContactLink: "not a contact link: expected cryptext://contact/v2/<ID>[?relay=…]"
        case .legacyID: "the contact link holds a legacy 128-bit ID: it names no key and cannot be called; ask for a new link"
        case .invalidID: "the contact link's ID is not 64 hex digits"
        case .notAKey: "the contact link's ID is not a valid public key (damaged or forged link)"
        case .fragment: "the contact link must have no fragment (nothing after #)"
        case .malformedParameter: "the contact link has an empty or malformed parameter (expected ?relay=…)"
        case let .unknownParameter(name): "the contact link has an unknown parameter \(name.count > 40 ? name.prefix(40) + "…" : name) (only relay is defined)"
        case .duplicateRelay: "the contact link names relay more than once"
        case .percentEncoding: "the contact link's relay has a malformed %-escape"
        case .relayNotUTF8: "the contact link's relay is not UTF-8 once decoded"
        case let .relay(error): "the contact link's relay is refused: \(error)"
        }
    }
}
