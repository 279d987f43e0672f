import TetherCrypto

/// The six-digit short authentication string both devices derive from the Noise handshake
/// hash (client.md §10). The phone shows it; the user types it on the Mac.
public enum SAS {
    public static let digitCount = 6

    /// HKDF-SHA256(h, salt none, info "iterm2-sas-v1", 8) read big-endian, mod 10^6, six digits.
    public static func derive(handshakeHash h: [UInt8]) -> String {
        let okm = try! HKDF.deriveKey(.sha256, inputKeyMaterial: h, info: Array("iterm2-sas-v1".utf8), outputByteCount: 8)
        let value = okm.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let code = String(value % 1_000_000)
        return String(repeating: "0", count: digitCount - code.count) + code
    }

    /// True if `entry`, with surrounding whitespace trimmed, is exactly six ASCII digits equal to
    /// `expected`. Compared in constant time.
    public static func matches(entry: String, expected: String) -> Bool {
        let trimmed = Array(entry.utf8.drop(while: isWhitespace).reversed().drop(while: isWhitespace).reversed())
        guard isComplete(trimmed) else { return false }
        return constantTimeEquals(trimmed, Array(expected.utf8))
    }

    /// Exactly six ASCII digits.
    public static func isComplete(_ entry: String) -> Bool { isComplete(Array(entry.utf8)) }

    private static func isComplete(_ bytes: [UInt8]) -> Bool {
        bytes.count == digitCount && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private static func isWhitespace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d }
}
