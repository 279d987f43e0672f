/// The peer's offence behind `DataChannelFailure.protocolViolation`.
public enum DataChannelViolation: Sendable, Equatable {
    /// A message above this side's advertised a=max-message-size (RFC 8841 §6.1).
    case messageTooLarge(limit: Int)
    /// A payload protocol identifier the channel does not carry: WebRTC String (Tether's channel is
    /// binary, signaling.md §7.4), the deprecated partial kinds, anything unknown.
    case unexpectedPPID(UInt32)
    /// A DCEP message on the open channel's stream, or an ACK nobody asked for.
    case unexpectedDCEP
    case malformedDCEP(DCEPDecodingError)
    /// A piece of a message with another identifier than the pieces before it.
    case interleavedMessage(stream: UInt16)
}
