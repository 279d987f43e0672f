/// The companion transport framing over Noise (client.md §9.5): an application frame is split
/// into chunks, each sent as one Noise transport message whose plaintext is a continuation
/// byte (0x00 = last chunk, anything else = more follow) and the chunk.
public enum NoiseFraming {
    /// Noise's maximum message length.
    public static let maxMessageLength = 65_535
    /// The largest chunk: one message minus the 16-byte tag and the continuation byte.
    public static let maxChunkLength = maxMessageLength - CipherState.tagByteCount - 1
    public static let lastChunk: UInt8 = 0x00
    public static let moreChunks: UInt8 = 0x01

    /// How many messages a frame of `length` bytes takes (an empty frame still takes one).
    public static func messageCount(forFrameLength length: Int) -> Int {
        max(1, (length + maxChunkLength - 1) / maxChunkLength)
    }
}
