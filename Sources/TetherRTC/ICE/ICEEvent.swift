/// What an agent tells its owner, through the one handler it was made with. The handler runs on
/// the agent's ICE thread, one event at a time and in order; the owner hops onto its own loop
/// with the event and must not block (every other event of the call waits behind it).
public enum ICEEvent: Sendable {
    /// A local candidate to trickle: the attribute value without `a=` (signaling.md §7.1), in
    /// its `ICECandidate.signalled` form.
    case localCandidate(String)
    /// Gathering finished: send the end-of-candidates `candidate` signal (an empty string).
    case gatheringComplete
    case stateChanged(ICEState)
    /// The pair data now flows over (reported again if nomination changes it).
    case selectedPair(local: ICECandidate, remote: ICECandidate)
    /// A datagram from the peer on the component.
    case datagram([UInt8])
}
