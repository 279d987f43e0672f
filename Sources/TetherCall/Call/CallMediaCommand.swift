/// What the machine asks of a call's media transport (`CallMediaTransport.perform`).
public enum CallMediaCommand: Equatable, Sendable {
    /// The caller's first command: make the peer connection with its one data channel (label
    /// `cryptext`, ordered, reliable, §7.4), create the offer, set it as the local description,
    /// report it (`localDescription`) and start gathering.
    case createOffer
    /// The callee's first command, on consent: make the peer connection, set this offer as the
    /// remote description, create the answer, set it as the local description, report it, and
    /// start gathering.
    case acceptOffer(sdp: String)
    /// The caller sets the callee's answer as the remote description.
    case setRemoteAnswer(sdp: String)
    /// Add a peer's candidate; only ever after the remote description is set.
    case addRemoteCandidate(CallCandidate)
    /// Send one data-channel message.
    case send([UInt8])
    /// Close the data channel and the peer connection and forget the call's media: the last
    /// command a transport gets.
    case close
}
