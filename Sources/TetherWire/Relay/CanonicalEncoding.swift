/// The canonical length-prefixed encoding every signed or hashed relay value uses
/// (client.md §3, relay.md §3.6): for each of `[UTF-8(domain)] ++ fields`, a 4-byte
/// big-endian length followed by the bytes. No count, no terminator.
///
/// The domain is prefixed like a field, so `("AB", "C")` and `("A", "BC")` differ, and zero
/// fields differ from one empty field.
public enum CanonicalEncoding {
    /// Domains in use.
    public static let roomDomain = "iterm2-room"
    public static let joinDomain = "iterm2-relay-join"
    public static let deleteDomain = "iterm2-relay-delete"
    public static let attestDomain = "iterm2-relay-attest"

    public static func encode(domain: String, fields: [[UInt8]]) -> [UInt8] {
        let domainBytes = Array(domain.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(4 + domainBytes.count + fields.reduce(0) { $0 + 4 + $1.count })
        append(domainBytes, to: &out)
        for field in fields { append(field, to: &out) }
        return out
    }

    private static func append(_ element: [UInt8], to out: inout [UInt8]) {
        // Every element is at most a few hundred bytes; a 4 GiB field is a caller bug.
        precondition(element.count <= Int(UInt32.max), "canonical field longer than 2^32-1 bytes")
        let length = UInt32(element.count)
        out += [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        out += element
    }
}
