/// An incremental UTF-8 validator (RFC 3629): no overlongs, no surrogates, nothing above
/// U+10FFFF. It fails on the first byte that cannot start or continue a valid sequence, so a
/// text message split across fragments is rejected as early as possible.
public struct UTF8Validator: Sendable {
    /// Continuation bytes still expected in the current sequence.
    private var remaining: UInt8 = 0
    /// The allowed range of the next continuation byte (narrowed after E0, ED, F0, F4).
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF

    public init() {}

    /// True when the bytes so far end on a character boundary.
    public var isComplete: Bool { remaining == 0 }

    /// Feeds bytes; returns false at the first invalid one (the validator is then unusable).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes {
            if remaining == 0 {
                switch byte {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: remaining = 1; low = 0x80; high = 0xBF
                case 0xE0: remaining = 2; low = 0xA0; high = 0xBF
                case 0xE1...0xEC, 0xEE...0xEF: remaining = 2; low = 0x80; high = 0xBF
                case 0xED: remaining = 2; low = 0x80; high = 0x9F
                case 0xF0: remaining = 3; low = 0x90; high = 0xBF
                case 0xF1...0xF3: remaining = 3; low = 0x80; high = 0xBF
                case 0xF4: remaining = 3; low = 0x80; high = 0x8F
                default: return false
                }
            } else {
                guard byte >= low, byte <= high else { return false }
                remaining -= 1
                low = 0x80
                high = 0xBF
            }
        }
        return true
    }

    public mutating func feed(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { feed($0) } }

    /// True if `bytes` is complete, valid UTF-8.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        var validator = UTF8Validator()
        return validator.feed(bytes) && validator.isComplete
    }
}
