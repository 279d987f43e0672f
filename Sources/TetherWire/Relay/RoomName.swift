import TetherCrypto
import TetherEncoding

/// A room's name: lowercase hex of SHA-256(canonical("iterm2-room", [rs, UTF-8(pid)])).
///
/// Sent only in the `x-relay-room` header, never in a URL or a log line. Held as its 32 bytes
/// inline (no allocation): a relay keeps one per resident room, in several tables.
public struct RoomName: Sendable, Hashable, CustomStringConvertible {
    /// Buckets of the shard map (client.md §4, relay.md §8.1).
    public static let bucketCount = 65_536

    private let digestWords: Digest256

    /// The name of the room for a Mac static key `rs` (32 bytes) and a pairing id.
    public init(responderStaticKey rs: [UInt8], pairingID: String) {
        digestWords = Digest256(SHA256.hash(CanonicalEncoding.encode(domain: CanonicalEncoding.roomDomain, fields: [rs, Array(pairingID.utf8)])))
    }

    /// Validates a received `x-relay-room` value: exactly `^[0-9a-f]{64}$` (uppercase and
    /// non-ASCII digits are refused).
    public init?(header value: String) {
        guard let digest = Digest256(lowercaseHex: value) else { return nil }
        digestWords = digest
    }

    /// The 32 digest bytes.
    public var digest: [UInt8] { digestWords.bytes }

    /// The 64 lowercase hex characters.
    public var hex: String { digestWords.hex() }

    /// The shard bucket: the last two digest bytes, big-endian (0…65535).
    public var bucket: Int { Int(digestWords.d & 0xFFFF) }

    /// An opaque tag for logs: the first 4 bytes of SHA-256 of the ASCII name, in hex. It lets
    /// an operator follow one room through the log without the log revealing the name.
    public var logTag: String { Hex.encode(SHA256.hash(transcriptField).prefix(4)) }

    /// The transcript field: the 64 ASCII characters (not the 32 decoded bytes).
    public var transcriptField: [UInt8] { digestWords.hexUTF8() }

    /// Descriptions never expose the name.
    public var description: String { "room \(logTag)" }
}
