/// What a call's media transport reports (`CallMediaTransportDelegate`); the driver tags each
/// with the call whose transport produced it and hands it to the machine as `CallEvent.media`.
public enum CallMediaEvent: Equatable, Sendable {
    /// The offer (after `createOffer`) or the answer (after `acceptOffer`), set as the local
    /// description.
    case localDescription(sdp: String)
    /// A gathered local candidate, or the end of candidates (`CallCandidate.isEndOfCandidates`).
    case localCandidate(CallCandidate)
    /// The data channel is open (§7.4).
    case channelOpen
    /// One data-channel message: one secure-channel frame (§7.4, §9.2).
    case channelMessage([UInt8])
    /// The data channel closed without this side asking.
    case channelClosed
    /// ICE, DTLS or the peer connection failed, or a command could not be carried out (an SDP
    /// the transport refused, for instance).
    case failed
}
