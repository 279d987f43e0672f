/// Why `DataChannelAssociation.send` refused a message; the message was not queued.
public enum DataChannelSendError: Error, Sendable, Equatable {
    /// Above the peer's a=max-message-size or this side's own bound (RFC 8841 §6.1).
    case messageTooLarge(size: Int, limit: Int)
    /// Before `channelOpen`.
    case notOpen
    /// After `closeChannel`, `close`, the peer's reset or a failure.
    case closed
    /// The messages waiting for room in SCTP's send buffer already hold `limit` bytes.
    case queueFull(limit: Int)
}
