// CBOR (RFC 8949) decoding for App Attest objects, on the standard library alone (fuzzed as
// Fuzz/CBOR by scripts/fuzz).

/// One decoded CBOR data item.
public indirect enum CBOR: Sendable, Equatable {
    case unsigned(UInt64)
    /// The negative integer −1 − n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// Entries in encoded order (keys are unique).
    case map([Entry])
    /// A tag and its content, passed through uninterpreted.
    case tagged(UInt64, CBOR)
    /// false (20), true (21), null (22), undefined (23) and the other simple values.
    case simple(UInt8)
    case float(Double)

    public struct Entry: Sendable, Equatable {
        public let key: CBOR
        public let value: CBOR

        public init(key: CBOR, value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// The value under a text key of a map; nil if this is not a map or the key is absent.
    public subscript(key: String) -> CBOR? {
        guard case let .map(entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    public var bytesValue: [UInt8]? {
        if case let .bytes(value) = self { return value }
        return nil
    }

    public var textValue: String? {
        if case let .text(value) = self { return value }
        return nil
    }

    public var arrayValue: [CBOR]? {
        if case let .array(value) = self { return value }
        return nil
    }
}

/// Why input is not accepted. Malformed or hostile input is always one of these, never a crash
/// or an allocation larger than the input.
public enum CBORError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated
    case trailingBytes(Int)
    case tooDeep
    case tooManyItems
    case tooLong
    case reservedAdditionalInformation(UInt8)
    case invalidUTF8
    case duplicateKey
    case unexpectedBreak
    case badIndefiniteChunk
    /// Well-formed, but outside the profile the caller asked for.
    case notInProfile(String)

    public var description: String {
        switch self {
        case .truncated: "truncated"
        case let .trailingBytes(count): "\(count) trailing bytes"
        case .tooDeep: "nested too deeply"
        case .tooManyItems: "too many items"
        case .tooLong: "a length is too large"
        case let .reservedAdditionalInformation(value): "reserved additional information \(value)"
        case .invalidUTF8: "text string is not UTF-8"
        case .duplicateKey: "duplicate map key"
        case .unexpectedBreak: "break outside an indefinite-length item"
        case .badIndefiniteChunk: "indefinite-length string with a chunk of another type"
        case let .notInProfile(what): "\(what) not allowed"
        }
    }
}

/// Decodes one CBOR item that must fill the whole input.
public struct CBORDecoder: Sendable {
    public struct Limits: Sendable {
        /// Containers (arrays, maps, tags) nested deeper than this fail.
        public var maxDepth = 16
        /// Items in all (every element, key and value counts).
        public var maxItems = 10_000
        /// The longest byte or text string; also bounds every declared count.
        public var maxLength = 1 << 20
        public init() {}
    }

    public enum Profile: Sendable {
        /// Everything RFC 8949 defines: indefinite lengths, any map keys, tags, floats, simple values.
        case general
        /// relay.md §5.1 step 1: unsigned integers, byte and text strings, definite arrays and
        /// definite maps with text keys, lengths up to 2^53. Everything else is refused.
        case appAttest
    }

    public let limits: Limits
    public let profile: Profile

    public init(limits: Limits = Limits(), profile: Profile = .general) {
        self.limits = limits
        self.profile = profile
    }

    public func decode(_ bytes: [UInt8]) throws(CBORError) -> CBOR {
        var reader = Reader(bytes: bytes, limits: limits, strict: profile == .appAttest)
        let value = try reader.item(depth: 0)
        guard reader.index == bytes.count else { throw .trailingBytes(bytes.count - reader.index) }
        return value
    }
}

private struct Reader {
    let bytes: [UInt8]
    let limits: CBORDecoder.Limits
    let strict: Bool
    var index = 0
    var items = 0

    init(bytes: [UInt8], limits: CBORDecoder.Limits, strict: Bool) {
        self.bytes = bytes
        self.limits = limits
        self.strict = strict
    }

    /// The break code (0xFF) ends an indefinite-length item.
    static let breakCode: UInt8 = 0xFF

    mutating func byte() throws(CBORError) -> UInt8 {
        guard index < bytes.count else { throw .truncated }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func take(_ count: Int) throws(CBORError) -> ArraySlice<UInt8> {
        guard count <= bytes.count - index else { throw .truncated }
        defer { index += count }
        return bytes[index..<index + count]
    }

    /// The argument of a head with additional information `info`; nil for indefinite length (31).
    mutating func argument(_ info: UInt8) throws(CBORError) -> UInt64? {
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return UInt64(try byte())
        case 25, 26, 27:
            let width = 1 << (info - 24)
            return try take(width).reduce(0) { $0 << 8 | UInt64($1) }
        case 31: return nil
        default: throw .reservedAdditionalInformation(info)
        }
    }

    /// A length or count: bounded by the limits and (for strict input) by 2^53.
    func length(_ value: UInt64) throws(CBORError) -> Int {
        if strict, value > 1 << 53 { throw .tooLong }
        guard value <= UInt64(limits.maxLength) else { throw .tooLong }
        return Int(value)
    }

    mutating func count() throws(CBORError) {
        items += 1
        guard items <= limits.maxItems else { throw .tooManyItems }
    }

    mutating func item(depth: Int) throws(CBORError) -> CBOR {
        try count()
        let head = try byte()
        let major = head >> 5, info = head & 0x1F
        if head == Self.breakCode { throw .unexpectedBreak }
        let argument = try argument(info)
        if argument == nil, strict { throw .notInProfile("indefinite length") }
        switch major {
        case 0:
            guard let argument else { throw .reservedAdditionalInformation(info) }
            return .unsigned(argument)
        case 1:
            guard let argument else { throw .reservedAdditionalInformation(info) }
            if strict { throw .notInProfile("negative integer") }
            return .negative(argument)
        case 2:
            return .bytes(try string(argument, major: 2))
        case 3:
            guard let text = String(validating: try string(argument, major: 3), as: UTF8.self) else { throw .invalidUTF8 }
            return .text(text)
        case 4:
            guard depth < limits.maxDepth else { throw .tooDeep }
            var elements: [CBOR] = []
            if let argument {
                let n = try length(argument)
                // Each element takes at least a byte: a count beyond the input is a lie.
                guard n <= bytes.count - index else { throw .truncated }
                elements.reserveCapacity(n)
                for _ in 0..<n { elements.append(try item(depth: depth + 1)) }
            } else {
                while try peekIsNotBreak() { elements.append(try item(depth: depth + 1)) }
            }
            return .array(elements)
        case 5:
            guard depth < limits.maxDepth else { throw .tooDeep }
            var entries: [CBOR.Entry] = []
            if let argument {
                let n = try length(argument)
                guard n <= (bytes.count - index) / 2 else { throw .truncated }
                entries.reserveCapacity(n)
                for _ in 0..<n { try entries.append(entry(depth: depth, in: entries)) }
            } else {
                while try peekIsNotBreak() { try entries.append(entry(depth: depth, in: entries)) }
            }
            return .map(entries)
        case 6:
            guard let argument else { throw .reservedAdditionalInformation(info) }
            if strict { throw .notInProfile("tag") }
            guard depth < limits.maxDepth else { throw .tooDeep }
            return .tagged(argument, try item(depth: depth + 1))
        default:
            if strict { throw .notInProfile("float or simple value") }
            return try floatOrSimple(info: info, argument: argument)
        }
    }

    mutating func entry(depth: Int, in entries: [CBOR.Entry]) throws(CBORError) -> CBOR.Entry {
        let key = try item(depth: depth + 1)
        if strict, key.textValue == nil { throw .notInProfile("non-text map key") }
        guard !entries.contains(where: { $0.key == key }) else { throw .duplicateKey }
        return CBOR.Entry(key: key, value: try item(depth: depth + 1))
    }

    /// True if another element follows; consumes the break code and returns false at the end.
    mutating func peekIsNotBreak() throws(CBORError) -> Bool {
        guard index < bytes.count else { throw .truncated }
        if bytes[index] == Self.breakCode {
            index += 1
            return false
        }
        return true
    }

    /// A definite string, or an indefinite one as the concatenation of definite chunks of the
    /// same major type.
    mutating func string(_ argument: UInt64?, major: UInt8) throws(CBORError) -> [UInt8] {
        if let argument { return Array(try take(try length(argument))) }
        var out: [UInt8] = []
        while try peekIsNotBreak() {
            try count()
            let head = try byte()
            guard head >> 5 == major, let chunk = try self.argument(head & 0x1F) else { throw .badIndefiniteChunk }
            let piece = try take(try length(chunk))
            guard out.count + piece.count <= limits.maxLength else { throw .tooLong }
            out.append(contentsOf: piece)
        }
        return out
    }

    func floatOrSimple(info: UInt8, argument: UInt64?) throws(CBORError) -> CBOR {
        guard let argument else { throw .unexpectedBreak }
        switch info {
        case 0..<24: return .simple(UInt8(argument))
        case 24:
            // Two-byte simple values below 32 are not well-formed (RFC 8949 §3.3).
            guard argument >= 32 else { throw .reservedAdditionalInformation(info) }
            return .simple(UInt8(argument))
        case 25: return .float(Self.half(UInt16(argument)))
        case 26: return .float(Double(Float(bitPattern: UInt32(argument))))
        default: return .float(Double(bitPattern: argument))
        }
    }

    /// IEEE 754 binary16 to Double (RFC 8949 Appendix D).
    static func half(_ bits: UInt16) -> Double {
        let exponent = Int(bits >> 10) & 0x1F, mantissa = Double(bits & 0x3FF)
        let magnitude: Double
        switch exponent {
        case 0: magnitude = mantissa * 0x1p-24
        case 31: magnitude = mantissa == 0 ? .infinity : .nan
        default: magnitude = (mantissa + 1024) * Double(sign: .plus, exponent: exponent - 25, significand: 1)
        }
        return bits & 0x8000 != 0 ? -magnitude : magnitude
    }
}
