public import TetherWire

/// The body of a call signal (signaling.md §7.1): what the b64std `body` of a `signal` envelope
/// decodes to, one case per `kind`.
public enum CallSignalBody: Equatable, Sendable {
    /// A session description and the sender's signed agreement key (§3.2): `offer` and `answer`.
    public struct Description: Equatable, Sendable {
        /// The SDP offer or answer.
        public var sdp: String
        /// The sender's X25519 agreement public key (32 bytes).
        public var agreementKey: [UInt8]
        /// The sender's ID key's signature over the binding of `agreementKey` (64 bytes).
        public var identitySignature: [UInt8]

        /// A description as sent or received; the signature is checked by the recipient (§7.2).
        public init(sdp: String, agreementKey: [UInt8], identitySignature: [UInt8]) {
            self.sdp = sdp
            self.agreementKey = agreementKey
            self.identitySignature = identitySignature
        }
    }

    /// Why the callee refused (`reject`, §7.1): the user declined, another call is in progress, or something failed.
    public enum RejectReason: String, Sendable, Hashable, CaseIterable {
        /// The user said no.
        case declined
        /// Another call is in progress (§7.2).
        case busy
        /// Something failed before the call could be taken.
        case error
    }

    /// Why either side ended a call it had (`close`, §7.1).
    public enum CloseReason: String, Sendable, Hashable, CaseIterable {
        /// A person hung up.
        case hangup
        /// A deadline of §7.5 passed.
        case timeout
        /// A violation or failure ended it (§9.6 termination).
        case error
    }

    /// The caller's offer (§7.3 step 1).
    case offer(Description)
    /// The callee's answer, after consent (§7.3 step 3).
    case answer(Description)
    /// One trickled candidate, or the end of them.
    case candidate(CallCandidate)
    /// Data-channel readiness (§7.3 step 4): it authenticates nothing.
    case channel
    /// The callee will not take the call.
    case reject(RejectReason)
    /// The call is over.
    case close(CloseReason)

    /// The envelope's `kind` for this body.
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
