/// SCTP payload protocol identifiers of WebRTC data channels (RFC 8831 §8), as IANA names them.
/// The deprecated partial kinds (52, 54) are absent: RFC 8831 §6.6 forbids sending them, so they
/// are refused like any other unknown identifier.
enum DataChannelPPID: UInt32, Sendable {
    /// WebRTC DCEP: DATA_CHANNEL_OPEN and DATA_CHANNEL_ACK (RFC 8832).
    case webRTCDCEP = 50
    case webRTCString = 51
    case webRTCBinary = 53
    /// An empty message cannot be an SCTP user message, so it travels as one byte with its own
    /// identifier (RFC 8831 §6.6).
    case webRTCStringEmpty = 56
    case webRTCBinaryEmpty = 57
}
