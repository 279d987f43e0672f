/// A 256-bit digest held as four big-endian words: inline (no allocation), hashed and compared as
/// words. Room names and room keys are digests a relay keeps one of per resident room, in several
/// tables, and derives bytes or hex from on every admission; each form is built here in one
/// allocation, straight from the words.
public struct Digest256: Sendable, Hashable {
    public let a, b, c, d: UInt64

    /// The digest of `bytes` (exactly 32).
    public init(_ bytes: [UInt8]) {
        precondition(bytes.count == 32, "a 256-bit digest is 32 bytes")
        func word(_ offset: Int) -> UInt64 { bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        a = word(0)
        b = word(8)
        c = word(16)
        d = word(24)
    }

    /// The digest written as exactly 64 lowercase hex digits; nil for anything else (uppercase,
    /// non-ASCII digits, another length).
    public init?(lowercaseHex text: String) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var count = 0
        for symbol in text.utf8 {
            let nibble: UInt8
            switch symbol {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = symbol - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = symbol - UInt8(ascii: "a") + 10
            default: return nil
            }
            guard count < 64 else { return nil }
            switch count / 16 {
            case 0: words.0 = words.0 << 4 | UInt64(nibble)
            case 1: words.1 = words.1 << 4 | UInt64(nibble)
            case 2: words.2 = words.2 << 4 | UInt64(nibble)
            default: words.3 = words.3 << 4 | UInt64(nibble)
            }
            count += 1
        }
        guard count == 64 else { return nil }
        (a, b, c, d) = words
    }

    /// Byte `i` (0..<32), most significant first.
    @inline(__always)
    private func byte(_ i: Int) -> UInt8 {
        let word = i < 8 ? a : i < 16 ? b : i < 24 ? c : d
        return UInt8(truncatingIfNeeded: word >> (56 - 8 * UInt64(i & 7)))
    }

    /// The 32 bytes.
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { out, count in
            for i in 0..<32 { out[i] = byte(i) }
            count = 32
        }
    }

    /// The first `bytes` bytes (at most 32) as lowercase hex digits, in ASCII.
    public func hexUTF8(prefix bytes: Int = 32) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 2 * bytes) { out, count in
            count = writeHex(prefix: bytes, to: out)
        }
    }

    /// The first `bytes` bytes (at most 32) as lowercase hex digits.
    public func hex(prefix bytes: Int = 32) -> String {
        String(unsafeUninitializedCapacity: 2 * bytes) { writeHex(prefix: bytes, to: $0) }
    }

    private func writeHex(prefix bytes: Int, to out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition((0...32).contains(bytes), "a 256-bit digest has 32 bytes")
        for i in 0..<bytes {
            out[2 * i] = Hex.digit(byte(i) >> 4)
            out[2 * i + 1] = Hex.digit(byte(i) & 0x0f)
        }
        return 2 * bytes
    }
}
