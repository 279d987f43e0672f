public import TetherWire

/// What a successful registration gives (signaling.md §5.3): the ID is routable from now on, and
/// these ICE servers carry calls until `iceExpiresAt` (UNIX seconds; not refreshed, §8.1).
public struct SignalingRegistration: Sendable, Equatable {
    public let id: SignalingID
    public let iceServers: [ICEServer]
    public let iceExpiresAt: Int64

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
    public let message: String
    public let call: CallUUID?
    public let kind: SignalKind?

    public var knownCode: SignalingErrorCode? { SignalingErrorCode(rawValue: code) }

    public var description: String { "\(code): \(message)" }
}
