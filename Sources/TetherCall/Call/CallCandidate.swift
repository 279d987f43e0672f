/// One trickled ICE candidate (signaling.md §7.1, §13.1), as the media transport produces and
/// consumes it and as a `candidate` body carries it: no WebRTC types, so any transport can use it.
public struct CallCandidate: Hashable, Sendable {
    /// The candidate attribute value without the leading `a=`; empty for the end of candidates.
    public var candidate: String
    /// The media stream's identification tag, or nil.
    public var sdpMid: String?
    /// The m-line's index in the SDP, or nil.
    public var sdpMLineIndex: Int?

    /// A candidate as the transport gathered it, or as a `candidate` body carried it.
    public init(candidate: String, sdpMid: String?, sdpMLineIndex: Int?) {
        self.candidate = candidate
        self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex
    }

    /// The end-of-candidates marker for the data m-line (§13.1).
    public static func endOfCandidates(sdpMid: String?, sdpMLineIndex: Int?) -> CallCandidate {
        CallCandidate(candidate: "", sdpMid: sdpMid, sdpMLineIndex: sdpMLineIndex)
    }

    /// The end-of-candidates marker (an empty candidate).
    public var isEndOfCandidates: Bool { candidate.isEmpty }

    /// What a peer accepts (§13.1): at least one of the two locators, and an m-line index that can
    /// be one (not negative, an exact JSON integer).
    public var isWellFormed: Bool {
        guard sdpMid != nil || sdpMLineIndex != nil else { return false }
        if let index = sdpMLineIndex { return index >= 0 && Int64(index) <= CallChannelLimits.maxIntegerMagnitude }
        return true
    }
}
