public import TetherWire

/// The body of a call signal (signaling.md §7.1): what the b64std `body` of a `signal` envelope
/// decodes to, one case per `kind`.
public enum CallSignalBody: Equatable, Sendable {
    /// A session description and the sender's signed agreement key (§3.2): `offer` and `answer`.
    public struct Description: Equatable, Sendable {
        public var sdp: String
        /// The sender's X25519 agreement public key (32 bytes).
        public var agreementKey: [UInt8]
        /// The sender's ID key's signature over the binding of `agreementKey` (64 bytes).
        public var identitySignature: [UInt8]

        public init(sdp: String, agreementKey: [UInt8], identitySignature: [UInt8]) {
            self.sdp = sdp
            self.agreementKey = agreementKey
            self.identitySignature = identitySignature
        }
    }

    public enum RejectReason: String, Sendable, Hashable, CaseIterable {
        case declined, busy, error
    }

    public enum CloseReason: String, Sendable, Hashable, CaseIterable {
        case hangup, timeout, error
    }

    case offer(Description)
    case answer(Description)
    case candidate(CallCandidate)
    /// Data-channel readiness (§7.3 step 4): it authenticates nothing.
    case channel
    case reject(RejectReason)
    case close(CloseReason)

    public var kind: SignalKind {
        switch self {
        case .offer: .offer
        case .answer: .answer
        case .candidate: .candidate
        case .channel: .channel
        case .reject: .reject
        case .close: .close
        }
    }
}
