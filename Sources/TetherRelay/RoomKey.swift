import TetherCrypto
public import TetherWire

/// How a room is named at rest: SHA-256 of its name, never the name itself. The name is the
/// rendezvous secret (whoever holds it can take a slot or burn the room's pairing cycles), so a
/// copied database must not yield it; the key does not lead back to it. The key's first 8 hex
/// digits are the room's log tag, so an operator can still follow a reaped room through the log.
/// The bucket (the name's last 16 bits, which any shard-map lookup reveals anyway) tells
/// housekeeping which loop hosts the room.
public struct RoomKey: Hashable, Sendable, CustomStringConvertible {
    /// 64 lowercase hex characters.
    public let hex: String
    public let bucket: Int

    public init(_ room: RoomName) {
        hex = Hex.encode(SHA256.hash(room.transcriptField))
        bucket = room.bucket
    }

    /// A key read back from storage.
    public init(hex: String, bucket: Int) {
        self.hex = hex
        self.bucket = bucket
    }

    /// Equal to `RoomName.logTag` of the room.
    public var logTag: String { String(hex.prefix(8)) }

    public var description: String { "room \(logTag)" }
}
