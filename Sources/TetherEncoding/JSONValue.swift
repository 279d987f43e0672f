/// A parsed JSON value that keeps numbers, booleans and null apart (Foundation's bridging
/// does not reliably tell `1` from `true` on Linux).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
    /// A number written with a fraction or an exponent, or beyond ±2^53: what `parseStrict`
    /// makes of it, so a field that must be an integer can refuse `2.0` (signaling.md §13.1).
    case inexactNumber(Double)

    /// An integer field of an object: a number with no fraction or exponent, |n| ≤ 2^53 (nil
    /// otherwise). Exact only for values from `parseStrict`.
    public func integer(_ key: String) -> Int64? {
        guard case let .object(fields) = self, case let .number(value)? = fields[key], value.rounded() == value,
              abs(value) <= 0x1p53 else { return nil }
        return Int64(value)
    }

    /// A string field of an object (nil when absent, not a string, or not an object).
    public func string(_ key: String) -> String? {
        guard case let .object(fields) = self, case let .string(value)? = fields[key] else { return nil }
        return value
    }

    /// A boolean field of an object (nil when absent, not a boolean, or not an object).
    public func bool(_ key: String) -> Bool? {
        guard case let .object(fields) = self, case let .bool(value)? = fields[key] else { return nil }
        return value
    }

    /// `text` as a JSON string literal, quotes included (RFC 8259 §7).
    public static func quoted(_ text: String) -> String { "\"" + escaped(text) + "\"" }

    /// The inside of a JSON string literal for `text` (RFC 8259 §7); shared by every message
    /// Tether writes by hand.
    public static func escaped(_ text: String) -> String {
        // Most text (ids, base64, placeholders) needs no escape: one byte scan, no rebuild.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u00"
                out.unicodeScalars.append(Unicode.Scalar(Hex.digit(UInt8(scalar.value >> 4))))
                out.unicodeScalars.append(Unicode.Scalar(Hex.digit(UInt8(scalar.value & 0xF))))
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Parses one JSON text (RFC 8259, surrounding whitespace allowed); nil if malformed or too deep.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 32) -> JSONValue? {
        // A JSON text is UTF-8 (RFC 8259 §8.1); checked once, up front.
        guard isUTF8(bytes) else { return nil }
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth, strict: false)
        guard let value = parser.value(depth: 0) else { return nil }
        parser.skipWhitespace()
        return parser.index == bytes.count ? value : nil
    }

    /// Parses one JSON text as signaling.md §2 and §13.1 read JSON: a duplicate key anywhere
    /// makes the text invalid (nil), and numbers that are not exact integers come back as
    /// `.inexactNumber` (an ignored field may hold one; a field that must be an integer may not).
    public static func parseStrict(_ bytes: [UInt8], maxDepth: Int = 32) -> JSONValue? {
        guard isUTF8(bytes) else { return nil }
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth, strict: true)
        guard let value = parser.value(depth: 0) else { return nil }
        parser.skipWhitespace()
        return parser.index == bytes.count ? value : nil
    }

    /// Most texts on the wire are ASCII: a word-at-a-time scan settles those without building
    /// a String; anything else gets the standard library's full validation.
    static func isUTF8(_ bytes: [UInt8]) -> Bool {
        let ascii = bytes.withUnsafeBytes { raw -> Bool in
            var i = 0
            var high: UInt64 = 0
            while i + 8 <= raw.count {
                high |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                i += 8
            }
            while i < raw.count {
                high |= UInt64(raw[i])
                i += 1
            }
            return high & 0x8080_8080_8080_8080 == 0
        }
        return ascii || String(validating: bytes, as: UTF8.self) != nil
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    /// Duplicate keys refused, inexact numbers marked (`JSONValue.parseStrict`).
    let strict: Bool
    var index = 0

    init(bytes: [UInt8], maxDepth: Int, strict: Bool) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.strict = strict
    }

    mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D { index += 1 }
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard depth <= maxDepth else { return nil }
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    mutating func literal(_ word: String, _ value: JSONValue) -> JSONValue? {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<(index + w.count)]) == w else { return nil }
        index += w.count
        return value
    }

    mutating func number() -> JSONValue? {
        let start = index
        var exact = true
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { return nil }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else { while index < bytes.count, isDigit(bytes[index]) { index += 1 } }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            exact = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { return nil }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            exact = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { return nil }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else { return nil }
        // Past 2^53 doubles skip integers, so 2^53 + 1 reads as 2^53: only the literal 2^53
        // itself is exact at that magnitude.
        if strict, !exact || abs(value) > 0x1p53
            || (abs(value) == 0x1p53 && String(decoding: bytes[start..<index], as: UTF8.self).trimmingPrefix("-") != "9007199254740992") {
            return .inexactNumber(value)
        }
        return .number(value)
    }

    func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    mutating func string() -> String? {
        guard bytes[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        // Most strings on the wire (IDs, base64, UUIDs) hold no escape: one scan and one
        // String, instead of a scalar at a time (the signaling server parses every envelope).
        var end = index
        while end < bytes.count {
            let c = bytes[end]
            if c == UInt8(ascii: "\"") {
                let text = String(decoding: bytes[index..<end], as: UTF8.self)
                index = end + 1
                return text
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { break }
            end += 1
        }
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        func flush() {
            if !raw.isEmpty {
                scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
                raw = []
            }
        }
        while index < bytes.count {
            let c = bytes[index]
            index += 1
            switch c {
            case UInt8(ascii: "\""):
                flush()
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush()
                guard index < bytes.count else { return nil }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(code) {
                        // A surrogate pair.
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                        index += 2
                        guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(code) {
                        return nil
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    scalars.append(scalar)
                default: return nil
                }
            case 0x00..<0x20:
                return nil
            default:
                raw.append(c)
            }
        }
        return nil
    }

    mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16) else { return nil }
        index += 4
        return value
    }

    mutating func array(depth: Int) -> JSONValue? {
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            guard let item = value(depth: depth + 1) else { return nil }
            items.append(item)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            return nil
        }
    }

    mutating func object(depth: Int) -> JSONValue? {
        index += 1
        var fields: [String: JSONValue] = [:]
        fields.reserveCapacity(8)   // a signaling envelope's eight fields without a regrowth
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
        while true {
            skipWhitespace()
            guard index < bytes.count, let key = string() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            guard let item = value(depth: depth + 1) else { return nil }
            // Like JSON.parse, the last duplicate wins, unless strict.
            if fields.updateValue(item, forKey: key) != nil, strict { return nil }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
            return nil
        }
    }
}
