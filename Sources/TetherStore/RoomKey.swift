import TetherCrypto
public import TetherWire
public import TetherEncoding

/// How a room is named at rest: SHA-256 of its name, never the name itself. The name is the
/// rendezvous secret (whoever holds it can take a slot or burn the room's pairing cycles), so a
/// copied database must not yield it; the key does not lead back to it. The key's first 8 hex
/// digits are the room's log tag, so an operator can still follow a reaped room through the log.
/// The bucket (the name's last 16 bits, which any shard-map lookup reveals anyway) tells
/// housekeeping which loop hosts the room.
///
/// Held inline (34 bytes, no allocation): every resident room keeps one.
public struct RoomKey: Hashable, Sendable, CustomStringConvertible {
    private let a, b, c, d: UInt64
    private let bucketBits: UInt16

    public init(_ room: RoomName) {
        self.init(digest: SHA256.hash(room.transcriptField), bucket: room.bucket)
    }

    /// A key read back from storage; nil unless `hex` is 64 lowercase hex digits.
    public init?(hex: String, bucket: Int) {
        guard Hex.isLowercase(hex, count: 64), let digest = try? Hex.decode(hex), (0..<RoomName.bucketCount).contains(bucket) else { return nil }
        self.init(digest: digest, bucket: bucket)
    }

    private init(digest: [UInt8], bucket: Int) {
        func word(_ offset: Int) -> UInt64 { digest[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        a = word(0)
        b = word(8)
        c = word(16)
        d = word(24)
        bucketBits = UInt16(truncatingIfNeeded: bucket)
    }

    public var bucket: Int { Int(bucketBits) }

    /// The 32 digest bytes.
    public var bytes: [UInt8] {
        [a, b, c, d].flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (56 - 8 * $0)) } }
    }

    /// 64 lowercase hex digits: the stored form.
    public var hex: String { Hex.encode(bytes) }

    /// Equal to `RoomName.logTag` of the room: the first 4 digest bytes in hex.
    public var logTag: String {
        let tag = a >> 32
        return String(unsafeUninitializedCapacity: 8) { out in
            for i in 0..<8 { out[i] = Hex.digit(UInt8(truncatingIfNeeded: tag >> (28 - 4 * UInt64(i))) & 0x0f) }
            return 8
        }
    }

    public var description: String { "room \(logTag)" }
}
