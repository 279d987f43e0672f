/// Hexadecimal: lowercase on output (room names, tokens, logs), either case on input.
public enum Hex {
    public enum Failure: Error, Equatable, Sendable {
        case oddLength
        case invalidCharacter
    }

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable { encode(contiguous: $0) } ?? encode(contiguous: Array(bytes))
    }

    /// The lowercase digit for `nibble` (0...15).
    @inline(__always)
    public static func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    private static func encode(contiguous bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer { encode(contiguous: $0) }
    }

    // Written straight into the string's storage: the room key's hex is built for every store
    // call and log line, so no intermediate array.
    private static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = digit(byte >> 4)
                out[2 * i + 1] = digit(byte & 0x0f)
            }
            return bytes.count * 2
        }
    }

    public static func decode(_ text: String) throws(Failure) -> [UInt8] {
        let symbols = Array(text.utf8)
        guard symbols.count % 2 == 0 else { throw .oddLength }
        var out = [UInt8]()
        out.reserveCapacity(symbols.count / 2)
        var i = 0
        while i < symbols.count {
            guard let high = nibble(symbols[i]), let low = nibble(symbols[i + 1]) else { throw .invalidCharacter }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// True if `text` is exactly `count` characters of lowercase hex (`[0-9a-f]`).
    public static func isLowercase(_ text: String, count: Int) -> Bool {
        var n = 0
        for symbol in text.utf8 {
            guard (symbol >= UInt8(ascii: "0") && symbol <= UInt8(ascii: "9")) || (symbol >= UInt8(ascii: "a") && symbol <= UInt8(ascii: "f")) else {
                return false
            }
            n += 1
        }
        return n == count
    }

    /// The value of one hex digit of either case (nil for anything else).
    public static func value(of c: UInt8) -> UInt8? { nibble(c) }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
