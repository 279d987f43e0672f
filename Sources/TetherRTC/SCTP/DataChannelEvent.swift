/// What a `DataChannelAssociation` reports, on its queue, in the order it happened.
public enum DataChannelEvent: Sendable, Equatable {
    /// The `cryptext` channel is open: the opener has handed its DATA_CHANNEL_OPEN to SCTP (its
    /// messages follow it on the same ordered stream, RFC 8832 §6), the other side has answered
    /// one with DATA_CHANNEL_ACK. `send` works from here on.
    case channelOpen
    /// One whole message (one secure-channel frame, signaling.md §7.4); empty for WebRTC Binary
    /// Empty.
    case message([UInt8])
    /// Both directions of the channel's stream are reset (RFC 8831 §6.7), whoever began; nothing
    /// more arrives and `send` fails.
    case channelClosed
    /// The peer opened a channel this side will not have; its stream was reset and the
    /// association goes on.
    case peerChannelRefused(DataChannelRefusal)
    /// The association is over and has been torn down; the last event.
    case failed(DataChannelFailure)
}
