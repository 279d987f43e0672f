public import TetherWire
import TetherCrypto

/// The safety number of a session (signaling.md §11): 60 digits both sides compute from the two
/// IDs the KK prologue named. Comparing it is comparing both full IDs.
public enum SafetyNumber {
    static let label = Array("cryptext.safety-number.v2".utf8)

    /// Twelve groups of five digits joined by single spaces.
    public static func of(_ a: SignalingID, _ b: SignalingID) -> String {
        let (k1, k2) = a < b ? (a.key, b.key) : (b.key, a.key)
        let m = SHA256.hash(label + [0, 1] + k1 + k2) + SHA256.hash(label + [0, 2] + k1 + k2)
        var groups: [String] = []
        for g in 0..<12 {
            let value = m[5 * g..<5 * g + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000
            let digits = String(value)
            groups.append(String(repeating: "0", count: 5 - digits.count) + digits)
        }
        return groups.joined(separator: " ")
    }
}
