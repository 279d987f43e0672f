public import TetherWire

/// Why a signaling connection ended, and whether trying again can help.
public struct SignalingFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The WebSocket close code (1006 when the connection simply went).
    public let closeCode: UInt16
    /// The close reason as sent (a §5.6 code, or empty).
    public let reason: String
    /// The `error` the server sent before closing, if any (§5.6: it comes first).
    public let error: SignalingRefusal?
    /// The connection had registered before it ended.
    public let registered: Bool
    /// Set when the client itself gave up on the connection (a violation or a timeout).
    public let localProblem: String?

    init(closeCode: UInt16, reason: String, error: SignalingRefusal?, registered: Bool, localProblem: String? = nil) {
        self.closeCode = closeCode
        self.reason = reason
        self.error = error
        self.registered = registered
        self.localProblem = localProblem
    }

    static func protocolViolation(_ what: String) -> SignalingFailure {
        SignalingFailure(closeCode: 1002, reason: "", error: nil, registered: false, localProblem: what)
    }

    static func unreachable(_ what: String) -> SignalingFailure {
        SignalingFailure(closeCode: 1006, reason: "", error: nil, registered: false, localProblem: what)
    }

    /// The §5.6 code that ended the connection: the error sent first, or the close reason.
    public var code: SignalingErrorCode? {
        error?.knownCode ?? SignalingErrorCode(rawValue: reason)
    }

    /// Retrying cannot help: the server refused this identity's signature (its key is not what
    /// the ID says) or the messages this client writes. Everything else — a restart
    /// (`shutting_down`), `unavailable`, a lost network, an expired challenge, even
    /// `duplicate_id` (the server frees an ID the moment its socket is gone, so a half-open old
    /// connection clears within a keepalive round) — is tried again with back-off.
    public var isFinal: Bool {
        guard !registered else { return false }
        return code == .badSignature || code == .badMessage
    }

    /// A sentence for the user: the code, or what this side found wrong.
    public var description: String {
        if let localProblem { return "signaling: \(localProblem)" }
        switch code {
        case .duplicateID?: return "signaling: this ID is already connected from another device or session"
        case .badSignature?: return "signaling: the server refused this identity's signature"
        case .unavailable?: return "signaling: the server cannot issue call credentials right now (try again later)"
        case .challengeExpired?: return "signaling: the registration took too long"
        case let code?: return "signaling: closed by the server (\(code.rawValue))"
        case nil:
            if closeCode == 1001 { return "signaling: the server is shutting down" }
            return "signaling: connection closed (\(closeCode)\(reason.isEmpty ? "" : " \(reason)"))"
        }
    }
}
