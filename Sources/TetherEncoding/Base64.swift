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

    // The signaling server encodes and checks base64 in every envelope it forwards: one pass
    // over contiguous bytes, no intermediate arrays.
    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        let length = pad ? (bytes.count + 2) / 3 * 4 : (bytes.count * 4 + 2) / 3
        guard length > 0 else { return "" }
        return bytes.withUnsafeBufferPointer { bytes in
            alphabet.withUnsafeBufferPointer { alphabet in
                String(unsafeUninitializedCapacity: length) { out in
                    var i = 0, o = 0
                    while i + 3 <= bytes.count {
                        let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                        out[o] = alphabet[Int(v >> 18)]
                        out[o + 1] = alphabet[Int(v >> 12 & 63)]
                        out[o + 2] = alphabet[Int(v >> 6 & 63)]
                        out[o + 3] = alphabet[Int(v & 63)]
                        i += 3
                        o += 4
                    }
                    let rest = bytes.count - i
                    if rest > 0 {
                        let v = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                        out[o] = alphabet[Int(v >> 18)]
                        out[o + 1] = alphabet[Int(v >> 12 & 63)]
                        o += 2
                        if rest == 2 {
                            out[o] = alphabet[Int(v >> 6 & 63)]
                            o += 1
                        }
                        while pad, o < length {
                            out[o] = UInt8(ascii: "=")
                            o += 1
                        }
                    }
                    return o
                }
            }
        }
    }

    // MARK: Decoding

    /// Strict standard base64 (padding required).
    public static func decode(_ text: String) throws(Failure) -> [UInt8] {
        try decodePadded(text).bytes
    }

    /// Strict standard base64 that is also canonical, `encode(decode(s)) == s`: leftover bits in
    /// the last character must be zero (signaling.md §13.1 "b64std canonical").
    public static func decodeCanonical(_ text: String) throws(Failure) -> [UInt8] {
        let decoded = try decodePadded(text)
        guard decoded.leftoverBitsAreZero else { throw .invalidCharacter }
        return decoded.bytes
    }

    private static func decodePadded(_ text: String) throws(Failure) -> (bytes: [UInt8], leftoverBitsAreZero: Bool) {
        var text = text
        return try text.withUTF8 { symbols -> Decoded in
            guard symbols.count % 4 == 0 else { return .failure(.invalidLength) }
            return decodeSymbols(symbols, dropping: paddingCount(symbols), table: standardTable)
        }.get()
    }

    /// WHATWG forgiving-base64 decode (the relay's reading of client-supplied base64).
    public static func decodeForgiving(_ text: String) throws(Failure) -> [UInt8] {
        // ASCII whitespace per the Infra standard: TAB, LF, FF, CR, SPACE.
        let symbols = text.utf8.filter { $0 != 0x09 && $0 != 0x0a && $0 != 0x0c && $0 != 0x0d && $0 != 0x20 }
        return try symbols.withUnsafeBufferPointer { symbols in
            decodeSymbols(symbols, dropping: symbols.count % 4 == 0 ? paddingCount(symbols) : 0, table: standardTable)
        }.get().bytes
    }

    /// base64url; padding is optional (a padded value must be padded correctly).
    public static func decodeURL(_ text: String) throws(Failure) -> [UInt8] {
        var text = text
        return try text.withUTF8 { symbols -> Decoded in
            var pad = 0
            if symbols.last == UInt8(ascii: "=") {
                guard symbols.count % 4 == 0 else { return .failure(.invalidLength) }
                pad = paddingCount(symbols)
            }
            return decodeSymbols(symbols, dropping: pad, table: urlTable)
        }.get().bytes
    }

    /// One or two trailing `=` (never more).
    private static func paddingCount(_ symbols: UnsafeBufferPointer<UInt8>) -> Int {
        let pad = UInt8(ascii: "=")
        guard symbols.last == pad else { return 0 }
        return symbols.count >= 2 && symbols[symbols.count - 2] == pad ? 2 : 1
    }

    private typealias Decoded = Result<(bytes: [UInt8], leftoverBitsAreZero: Bool), Failure>

    /// Decodes `symbols` but their last `pad` (the padding). A remainder of one symbol (6 bits)
    /// cannot encode a byte; the bits a last partial symbol leaves over are reported, not judged
    /// (only b64std canonical refuses them). A `Result`, as the callers run it inside
    /// `withUTF8`, which does not pass a typed error on.
    private static func decodeSymbols(_ symbols: UnsafeBufferPointer<UInt8>, dropping pad: Int,
                                      table: [UInt8]) -> Decoded {
        let symbols = UnsafeBufferPointer(rebasing: symbols[..<(symbols.count - pad)])
        guard symbols.count % 4 != 1 else { return .failure(.invalidLength) }
        var valid = true
        var leftover: UInt32 = 0
        let bytes = table.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: symbols.count / 4 * 3 + max(0, symbols.count % 4 - 1)) { out, count in
                var accumulator: UInt32 = 0
                var bits = 0
                var o = 0
                var invalidSeen: UInt8 = 0
                for symbol in symbols {
                    let value = table[Int(symbol)]
                    invalidSeen |= value & 0xc0   // every valid value is below 64
                    accumulator = accumulator << 6 | UInt32(value & 63)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        out[o] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                        o += 1
                        accumulator &= (1 << UInt32(bits)) - 1
                    }
                }
                valid = invalidSeen == 0
                leftover = accumulator
                count = o
            }
        }
        guard valid else { return .failure(.invalidCharacter) }
        return .success((bytes, leftover == 0))
    }
}
