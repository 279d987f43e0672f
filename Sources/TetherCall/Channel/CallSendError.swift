/// Why the user's own request was refused; the channel itself is unaffected.
public enum CallSendError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Before the peer's key confirmation (§9.3): nothing but the handshake may be sent.
    case notAuthenticated
    /// The channel terminated.
    case closed
    /// The payload breaks a limit the peer would terminate on (§9.5).
    case invalidPayload(CallPayloadProblem)
    /// The call's send queue is full (`CallSetupLimits.outgoingTexts`): wait for room
    /// (`CallAgent.queue(_:on:)` does) and send again.
    case queueFull
    /// The call is hanging up: it delivers what it holds and takes nothing new.
    case ending

    /// A sentence for the user.
    public var description: String {
        switch self {
        case .notAuthenticated: "the conversation is not authenticated yet"
        case .closed: "the secure channel is closed"
        case let .invalidPayload(problem): "cannot send: \(problem)"
        case .queueFull: "too many texts are waiting to be sent"
        case .ending: "the call is hanging up"
        }
    }
}
