/// Why a peer's DATA_CHANNEL_OPEN was answered with a stream reset instead of an ACK. Tether
/// has exactly one channel, `cryptext`, reliable and ordered, with no protocol (signaling.md §7.4).
public enum DataChannelRefusal: Sendable, Equatable {
    /// This side opens the channel itself, or already accepted one.
    case secondChannel(stream: UInt16)
    /// The stream id has this side's parity: the DTLS client opens even streams, the server odd
    /// ones (RFC 8832 §6).
    case streamParity(stream: UInt16)
    case wrongLabel(String)
    case notReliableOrdered(DCEPChannelType)
    case unexpectedProtocol(String)
    /// Bytes on the DCEP identifier that are no DCEP message.
    case malformed(DCEPDecodingError)
}
