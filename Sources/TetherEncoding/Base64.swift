/// Base64 (RFC 4648) in the three dialects the protocols use.
///
/// - `encode` emits the standard alphabet with `=` padding (what the relay sends, "b64std").
/// - `decode` is strict standard base64: padded to a multiple of 4, no whitespace, as
///   Foundation's `Data(base64Encoded:)` accepts it.
/// - `decodeForgiving` is WHATWG's forgiving-base64 (`atob`), which the relay applies to
///   client-supplied values: ASCII whitespace ignored, padding optional, base64url characters
///   rejected.
/// - `encodeURL`/`decodeURL` are base64url without padding (QR `rs`, JWS).
///
/// Decoders ignore non-zero bits left over in the last character, as both Foundation and
/// WHATWG do.
public enum Base64 {
    public enum Failure: Error, Equatable, Sendable {
        case invalidCharacter
        case invalidLength
    }

    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let invalid: UInt8 = 0xff
    private static let standardTable = table(standardAlphabet)
    private static let urlTable = table(urlAlphabet)

    private static func table(_ alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, symbol) in alphabet.enumerated() { table[Int(symbol)] = UInt8(value) }
        return table
    }

    // MARK: Encoding

    /// Standard alphabet, padded.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes), alphabet: standardAlphabet, pad: true)
    }

    /// base64url alphabet, no padding.
    public static func encodeURL(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes), alphabet: urlAlphabet, pad: false)
    }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], alphabet[Int(v & 63)]]
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let v = UInt32(bytes[i]) << 16
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)]]
            if pad { out += [UInt8(ascii: "="), UInt8(ascii: "=")] }
        case 2:
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)]]
            if pad { out.append(UInt8(ascii: "=")) }
        default: break
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Decoding

    /// Strict standard base64 (padding required).
    public static func decode(_ text: String) throws(Failure) -> [UInt8] {
        var symbols = Array(text.utf8)
        guard symbols.count % 4 == 0 else { throw .invalidLength }
        stripPadding(&symbols)
        return try decodeSymbols(symbols, table: standardTable)
    }

    /// Strict standard base64 that is also canonical, `encode(decode(s)) == s`: leftover bits in
    /// the last character must be zero (signaling.md §13.1 "b64std canonical").
    public static func decodeCanonical(_ text: String) throws(Failure) -> [UInt8] {
        let bytes = try decode(text)
        guard encode(bytes) == text else { throw .invalidCharacter }
        return bytes
    }

    /// WHATWG forgiving-base64 decode (the relay's reading of client-supplied base64).
    public static func decodeForgiving(_ text: String) throws(Failure) -> [UInt8] {
        // ASCII whitespace per the Infra standard: TAB, LF, FF, CR, SPACE.
        var symbols = text.utf8.filter { $0 != 0x09 && $0 != 0x0a && $0 != 0x0c && $0 != 0x0d && $0 != 0x20 }
        if symbols.count % 4 == 0 { stripPadding(&symbols) }
        return try decodeSymbols(symbols, table: standardTable)
    }

    /// base64url; padding is optional (a padded value must be padded correctly).
    public static func decodeURL(_ text: String) throws(Failure) -> [UInt8] {
        var symbols = Array(text.utf8)
        if symbols.last == UInt8(ascii: "=") {
            guard symbols.count % 4 == 0 else { throw .invalidLength }
            stripPadding(&symbols)
        }
        return try decodeSymbols(symbols, table: urlTable)
    }

    /// Drops one or two trailing `=` (never more).
    private static func stripPadding(_ symbols: inout [UInt8]) {
        let pad = UInt8(ascii: "=")
        if symbols.last == pad { symbols.removeLast() }
        if symbols.last == pad { symbols.removeLast() }
    }

    /// Decodes unpadded symbols. A remainder of one symbol (6 bits) cannot encode a byte.
    private static func decodeSymbols(_ symbols: [UInt8], table: [UInt8]) throws(Failure) -> [UInt8] {
        guard symbols.count % 4 != 1 else { throw .invalidLength }
        var out: [UInt8] = []
        out.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for symbol in symbols {
            let value = table[Int(symbol)]
            guard value != invalid else { throw .invalidCharacter }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return out
    }
}
