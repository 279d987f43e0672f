extension CBOR {
    /// The definite-length RFC 8949 encoding with the shortest heads (preferred serialisation).
    /// Map entries keep their given order.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case let .unsigned(value): Self.head(0, value, &out)
        case let .negative(value): Self.head(1, value, &out)
        case let .bytes(bytes):
            Self.head(2, UInt64(bytes.count), &out)
            out += bytes
        case let .text(text):
            Self.head(3, UInt64(text.utf8.count), &out)
            out += Array(text.utf8)
        case let .array(items):
            Self.head(4, UInt64(items.count), &out)
            for item in items { item.encode(into: &out) }
        case let .map(entries):
            Self.head(5, UInt64(entries.count), &out)
            for entry in entries {
                entry.key.encode(into: &out)
                entry.value.encode(into: &out)
            }
        case let .tagged(tag, item):
            Self.head(6, tag, &out)
            item.encode(into: &out)
        case let .simple(value):
            if value < 24 { out.append(0xE0 | value) } else { out += [0xF8, value] }
        case let .float(value):
            out.append(0xFB)
            withUnsafeBytes(of: value.bitPattern.bigEndian) { out += $0 }
        }
    }

    private static func head(_ major: UInt8, _ value: UInt64, _ out: inout [UInt8]) {
        let type = major << 5
        switch value {
        case ..<24: out.append(type | UInt8(value))
        case ...0xFF: out += [type | 24, UInt8(value)]
        case ...0xFFFF: out.append(type | 25); withUnsafeBytes(of: UInt16(value).bigEndian) { out += $0 }
        case ...0xFFFF_FFFF: out.append(type | 26); withUnsafeBytes(of: UInt32(value).bigEndian) { out += $0 }
        default: out.append(type | 27); withUnsafeBytes(of: value.bigEndian) { out += $0 }
        }
    }
}
