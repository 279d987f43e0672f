public import TetherCrypto
import TetherEncoding

/// A call's id (signaling.md §2): a UUID in lowercase canonical 8-4-4-4-12 form. The server
/// checks the form only (§13.1); clients make version 4 ids.
public struct CallUUID: Hashable, Sendable, CustomStringConvertible {
    public let text: String

    /// Exactly the lowercase canonical form; nil otherwise.
    public init?(_ text: String) {
        guard Self.isCanonical(text.utf8) else { return nil }
        self.text = text
    }

    /// A fresh random version 4 UUID.
    public static func random() -> CallUUID {
        var bytes = SecureRandom.bytes(16)
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Hex.encode(bytes)
        let i = hex.utf8
        func part(_ from: Int, _ count: Int) -> Substring { Substring(i.dropFirst(from).prefix(count)) }
        return CallUUID([part(0, 8), part(8, 4), part(12, 4), part(16, 4), part(20, 12)].joined(separator: "-"))!
    }

    public var description: String { text }

    static func isCanonical(_ utf8: String.UTF8View) -> Bool {
        guard utf8.count == 36 else { return false }
        for (offset, symbol) in utf8.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard symbol == UInt8(ascii: "-") else { return false }
            } else {
                guard (0x30...0x39).contains(symbol) || (0x61...0x66).contains(symbol) else { return false }
            }
        }
        return true
    }
}

/// The signal kinds (signaling.md §5.4); nothing else is ever forwarded.
public enum SignalKind: String, Sendable, Hashable, CaseIterable {
    case offer, answer, candidate, channel, reject, close
}
