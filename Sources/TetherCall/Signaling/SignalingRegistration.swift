public import TetherWire

/// What a successful registration gives (signaling.md §5.3): the ID is routable from now on, and
/// these ICE servers carry calls until `iceExpiresAt` (UNIX seconds; not refreshed, §8.1).
public struct SignalingRegistration: Sendable, Equatable {
    /// The registered ID.
    public let id: SignalingID
    /// STUN and TURN servers with their credentials (§8.4).
    public let iceServers: [ICEServer]
    /// When the TURN credentials expire, UNIX seconds (§5.3).
    public let iceExpiresAt: Int64

    /// A registration as the server's `registered` message states it.
    public init(id: SignalingID, iceServers: [ICEServer], iceExpiresAt: Int64) {
        self.id = id
        self.iceServers = iceServers
        self.iceExpiresAt = iceExpiresAt
    }
}

/// An `error` from the server (signaling.md §5.6) that did not end the connection by itself: a
/// signal or presence query it refused, or what it said before closing.
public struct SignalingRefusal: Sendable, Equatable, CustomStringConvertible {
    /// The §5.6 code as sent (`offline`, `rate_limited`…), kept as text: a newer server may send
    /// a code this client does not know.
    public let code: String
    /// The server's human-readable text (never shown as a reason on its own).
    public let message: String
    /// The call of the refused signal, when the server named it.
    public let call: CallUUID?
    /// The kind of the refused signal, when the server named it.
    public let kind: SignalKind?

    /// The code, when it is one of §5.6.
    public var knownCode: SignalingErrorCode? { SignalingErrorCode(rawValue: code) }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}
