import CTetherSCTP

/// A usrsctp notification copied out of its buffer (CTetherSCTP flattens the C union).
struct SCTPNotice: Sendable {
    let type: UInt16
    let flags: UInt16
    /// sac_state, for SCTP_ASSOC_CHANGE.
    let state: UInt16
    /// ssfe_error or pdapi_indication.
    let failure: UInt32
    /// The stream of a failed send or an aborted partial delivery.
    let stream: UInt32
    /// A stream reset's streams; empty means all of them (RFC 6525 §4.1).
    let streams: [UInt16]

    func resets(_ stream: UInt16) -> Bool { streams.isEmpty || streams.contains(stream) }

    static let associationChange = UInt16(SCTP_ASSOC_CHANGE)
    static let streamReset = UInt16(SCTP_STREAM_RESET_EVENT)
    static let sendFailed = UInt16(SCTP_SEND_FAILED_EVENT)
    static let partialDelivery = UInt16(SCTP_PARTIAL_DELIVERY_EVENT)
    static let shutdown = UInt16(SCTP_SHUTDOWN_EVENT)
}
