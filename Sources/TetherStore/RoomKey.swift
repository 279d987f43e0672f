import TetherCrypto
public import TetherWire
import TetherEncoding

/// How a room is named at rest: SHA-256 of its name, never the name itself. The name is the
/// rendezvous secret (whoever holds it can take a slot or burn the room's pairing cycles), so a
/// copied database must not yield it; the key does not lead back to it. The key's first 8 hex
/// digits are the room's log tag, so an operator can still follow a reaped room through the log.
/// The bucket (the name's last 16 bits, which any shard-map lookup reveals anyway) tells
/// housekeeping which loop hosts the room.
///
/// Held inline (34 bytes, no allocation): every resident room keeps one.
public struct RoomKey: Hashable, Sendable, CustomStringConvertible {
    private let digest: Digest256
    private let bucketBits: UInt16

    public init(_ room: RoomName) {
        self.init(digest: Digest256(SHA256.hash(room.transcriptField)), bucket: room.bucket)
    }

    /// A key read back from storage; nil unless `hex` is 64 lowercase hex digits.
    public init?(hex: String, bucket: Int) {
        guard let digest = Digest256(lowercaseHex: hex), (0..<RoomName.bucketCount).contains(bucket) else { return nil }
        self.init(digest: digest, bucket: bucket)
    }

    private init(digest: Digest256, bucket: Int) {
        self.digest = digest
        bucketBits = UInt16(truncatingIfNeeded: bucket)
    }

    public var bucket: Int { Int(bucketBits) }

    /// The 32 digest bytes.
    public var bytes: [UInt8] { digest.bytes }

    /// 64 lowercase hex digits: the stored form.
    public var hex: String { digest.hex() }

    /// Equal to `RoomName.logTag` of the room: the first 4 digest bytes in hex.
    public var logTag: String { digest.hex(prefix: 4) }

    public var description: String { "room \(logTag)" }
}
