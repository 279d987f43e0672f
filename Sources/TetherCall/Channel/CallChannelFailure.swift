/// Why a secure channel terminated (signaling.md §9.6, §10). Every failure is final: the call
/// ends (`close` `error`, or `timeout` for `confirmationTimeout`) and a new session means a new
/// call. No case carries key material or plaintext.
public enum CallChannelFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// Which way a limit was reached.
    public enum Direction: Sendable, Hashable {
        /// Frames from the peer.
        case incoming
        /// Frames this side would send.
        case outgoing
    }

    /// What went wrong in a key rotation (§10).
    public enum RotationProblem: Sendable, Hashable {
        /// `ROTATE_RESP` while this side had no request pending.
        case responseWithoutRequest
        /// A second `ROTATE_INIT` from the peer before the rotation completed.
        case repeatedRequest
        /// An NN message that fails to read, or carries a payload.
        case malformedMessage
    }

    /// A type byte other than `0x01` (handshake) and `0x02` (transport) (§9.2).
    case unknownFrameType(UInt8)
    /// A data-channel message with no type byte at all (§9.2).
    case emptyFrame
    /// Larger than 32,785 bytes (§9.6).
    case oversizeFrame(Int)
    /// A known frame type this state does not expect (§9.2): a handshake frame after the
    /// handshake, a transport frame before it, any frame to an initiator that has not started.
    case unexpectedFrame
    /// A KK handshake message that fails to read or carries a payload (§9.1).
    case handshakeFailed
    /// A transport frame that fails authentication: tampered, replayed, reordered, or under
    /// stale keys (§9.6).
    case authenticationFailure
    /// The first transport plaintext is not exactly `cryptext.channel-ready.v2` (§9.3).
    case badConfirmation
    /// A plaintext that is none of the kinds of §9.4 (a second confirmation included).
    case unknownPlaintext
    /// An application payload that breaks §9.5.
    case malformedPayload(CallPayloadProblem)
    /// A key rotation broke §10's rules.
    case rotation(RotationProblem)
    /// A 65th message queued while waiting for `ROTATE_RESP` (§10).
    case rotationQueueOverflow
    /// One hour since the channel began (§9.6).
    case sessionTimeLimit
    /// The 100,001st frame in a direction: received, or about to be sent (§9.6).
    case frameLimit(Direction)
    /// A 41st incoming frame within one fixed 1,000 ms window (§9.6).
    case incomingRateExceeded
    /// No key confirmation within 15 s of the channel's creation (§7.5).
    case confirmationTimeout
    /// This side's cipher failed to seal (a library failure, never the peer's doing).
    case cryptoFailure

    /// A sentence for the user; it names no key and no content.
    public var description: String {
        switch self {
        case let .unknownFrameType(byte): "unknown frame type 0x\(String(byte, radix: 16))"
        case .emptyFrame: "empty frame"
        case let .oversizeFrame(size): "frame of \(size) bytes exceeds \(CallChannelLimits.maxFrameBytes)"
        case .unexpectedFrame: "frame type not expected in this state"
        case .handshakeFailed: "the KK handshake failed"
        case .authenticationFailure: "a transport frame failed authentication"
        case .badConfirmation: "the first transport message is not the key confirmation"
        case .unknownPlaintext: "unknown transport plaintext"
        case let .malformedPayload(problem): "malformed application payload: \(problem)"
        case .rotation(.responseWithoutRequest): "ROTATE_RESP without a pending request"
        case .rotation(.repeatedRequest): "a second ROTATE_INIT before the rotation completed"
        case .rotation(.malformedMessage): "malformed rotation handshake message"
        case .rotationQueueOverflow: "more than \(CallChannelLimits.rotationQueueCapacity) messages queued during a rotation"
        case .sessionTimeLimit: "the session reached one hour"
        case .frameLimit(.incoming): "the peer sent more than \(CallChannelLimits.framesPerDirection) frames"
        case .frameLimit(.outgoing): "this side reached \(CallChannelLimits.framesPerDirection) frames"
        case .incomingRateExceeded: "more than \(CallChannelLimits.framesPerWindow) incoming frames in one second"
        case .confirmationTimeout: "no key confirmation within 15 s"
        case .cryptoFailure: "the local cipher failed"
        }
    }
}
