import TetherEncoding
/// An identity's public ID (signaling.md §3.1): the whole 32-byte Ed25519 signing key. On the wire
/// (JSON fields, signed strings, prologues, contact links) only the canonical form is used: 64
/// uppercase hex characters, nothing else.
public struct SignalingID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let keyByteCount = 32
    public static let canonicalLength = 64

    /// The canonical form: 64 uppercase hex characters.
    public let canonical: String

    /// The ID from exactly its canonical form; nil for anything else (lowercase, `CT2-`, dashes…).
    public init?(canonical text: String) {
        var text = text   // contiguous UTF-8 for the scan: every signal carries two IDs
        guard text.utf8.count == Self.canonicalLength,
              text.withUTF8({ $0.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) } }) else { return nil }
        canonical = text
    }

    /// The ID of a 32-byte public key.
    public init(key: [UInt8]) {
        precondition(key.count == Self.keyByteCount, "an ID is a 32-byte key")
        canonical = Hex.encode(key).uppercased()
    }

    /// The 32 key bytes.
    public var key: [UInt8] { try! Hex.decode(canonical) }

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Exactly 32 hex digits: a 128-bit label of the first Cryptext version, not a key.
        case legacy
        case invalid
        public var description: String {
            switch self {
            case .legacy: "a legacy 128-bit ID: it names no key and cannot be called; ask for the new ID"
            case .invalid: "not an ID: expected 64 hex digits, optionally as CT2-XXXX-XXXX-…"
            }
        }
    }

    /// Reads a typed or pasted ID (§3.1): surrounding whitespace trimmed, one leading `CT2-` in
    /// any case removed, every `-` and space removed, then exactly 64 hex digits of either case.
    public static func parse(userInput text: String) throws(ParseError) -> SignalingID {
        var bytes = Array(text.utf8)
        let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D]
        while let first = bytes.first, whitespace.contains(first) { bytes.removeFirst() }
        while let last = bytes.last, whitespace.contains(last) { bytes.removeLast() }
        if bytes.count >= 4, bytes[0] | 0x20 == UInt8(ascii: "c"), bytes[1] | 0x20 == UInt8(ascii: "t"),
           bytes[2] == UInt8(ascii: "2"), bytes[3] == UInt8(ascii: "-") {
            bytes.removeFirst(4)
        }
        bytes.removeAll { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: " ") }
        guard bytes.allSatisfy({ Hex.value(of: $0) != nil }) else { throw .invalid }
        if bytes.count == 32 { throw .legacy }
        guard bytes.count == canonicalLength else { throw .invalid }
        let upper = bytes.map { (0x61...0x66).contains($0) ? $0 - 0x20 : $0 }
        return SignalingID(canonical: String(decoding: upper, as: UTF8.self))!
    }

    /// `CT2-` and 16 groups of 4 separated by `-`: for people, never for the wire.
    public var display: String {
        var groups: [Substring] = []
        var rest = Substring(canonical)
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return "CT2-" + groups.joined(separator: "-")
    }

    public var description: String { display }

    /// Byte-wise order of the keys, which is also the order of the uppercase hex strings (§13.1 glare).
    public static func < (lhs: SignalingID, rhs: SignalingID) -> Bool { lhs.canonical.utf8.lexicographicallyPrecedes(rhs.canonical.utf8) }
}
