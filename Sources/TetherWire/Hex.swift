/// Hexadecimal: lowercase on output (room names, tokens, logs), either case on input.
public enum Hex {
    public enum Failure: Error, Equatable, Sendable {
        case oddLength
        case invalidCharacter
    }

    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
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

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
