/// Why an association ended without this side closing it.
public enum DataChannelFailure: Error, Sendable, Equatable {
    /// The INIT went unanswered or was refused (SCTP_CANT_STR_ASSOC).
    case cannotEstablish
    /// The peer aborted, or retransmissions ran out (SCTP_COMM_LOST).
    case associationLost
    /// The peer restarted the association, and with it lost the channel (SCTP_RESTART).
    case associationRestarted
    /// The peer shut the association down.
    case shutDown
    /// usrsctp refused a send with this errno (not a full buffer).
    case sendRefused(errno: Int32)
    /// SCTP gave up on a queued message (SCTP_SEND_FAILED_EVENT), which for a reliable channel
    /// means the association is going.
    case messageNotDelivered
    /// The peer broke RFC 8831/8832 or Tether's channel rules; the association was aborted.
    case protocolViolation(DataChannelViolation)
}
