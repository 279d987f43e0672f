/// A message waiting in the outbox for room in SCTP's send buffer: DCEP and user messages share
/// the one queue, so a DATA_CHANNEL_OPEN or ACK is never overtaken by what follows it.
struct OutgoingMessage: Sendable {
    let stream: UInt16
    let ppid: DataChannelPPID
    let payload: [UInt8]
}
