/// The little DER the App Attest checks read: one TLV at a time, definite lengths only, each
/// length in its shortest form (relay.md §5.1 step 8, §5.2 step 5).
struct DERReader {
    enum Failure: Error, Equatable {
        case unexpectedTag(expected: UInt8)
        case badLength
        case truncated
    }

    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: some Collection<UInt8>) {
        self.bytes = ArraySlice(bytes)
        index = self.bytes.startIndex
    }

    var isAtEnd: Bool { index == bytes.endIndex }

    /// The contents of the next element, which must carry `tag`.
    mutating func read(tag: UInt8) throws(Failure) -> ArraySlice<UInt8> {
        guard index < bytes.endIndex else { throw .truncated }
        guard bytes[index] == tag else { throw .unexpectedTag(expected: tag) }
        index += 1
        guard index < bytes.endIndex else { throw .truncated }
        let first = bytes[index]
        index += 1
        var length = Int(first)
        if first & 0x80 != 0 {
            let count = Int(first & 0x7F)
            // 1…4 length bytes, no leading zero, and long form only for lengths ≥ 128.
            guard (1...4).contains(count), count <= bytes.endIndex - index, bytes[index] != 0 else { throw .badLength }
            length = bytes[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
            index += count
            guard length >= 128 else { throw .badLength }
        }
        guard length <= bytes.endIndex - index else { throw .truncated }
        defer { index += length }
        return bytes[index..<index + length]
    }
}
