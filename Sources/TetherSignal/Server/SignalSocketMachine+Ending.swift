import TetherNet
import TetherWire

/// How a connection answers and ends (§4, §5.6, §6.1 step 4, §13.1): an `error` that keeps it,
/// an `error` then the close whose reason is its code, or a close without one.
extension SignalSocketMachine {
    /// An `error` that keeps the connection.
    func answer(_ code: SignalingErrorCode, call: CallUUID? = nil, kind: SignalKind? = nil) -> [SignalSocketAction] {
        [.count(.error(code)), .send(.error(code, call: call, kind: kind))]
    }

    /// `bad_message`: the connection is closed before registration and kept afterwards (§5.6).
    mutating func badMessage() -> [SignalSocketAction] {
        isRoutable ? answer(.badMessage) : end(.badMessage)
    }

    /// An `error`, then the close whose reason is its code (§5.6); the ID's presence and
    /// reservation go at once. Also how the server ends a registration itself (a node whose
    /// cluster lease lapsed ends its IDs `unavailable`).
    mutating func end(_ code: SignalingErrorCode) -> [SignalSocketAction] {
        if case .closed = stage { return [] }
        return answer(code) + leave() + [.close(code: Self.closeCode(for: code), reason: code.rawValue, discardingUnsentOutput: false)]
    }

    /// §4: a message over 65,536 bytes, which the transport refuses to read: `too_large`,
    /// close 1009. The transport itself sends the `error` and the close frame in place of the
    /// message.
    mutating func tooLarge() -> [SignalSocketAction] { end(.tooLarge) }

    /// The connection has not taken its output (its own replies, forwarded signals, pongs) for
    /// the transport's stall timeout: closed as one over its pending-output limit.
    mutating func stalled() -> [SignalSocketAction] { overflowed() }

    /// §6.4's close for a connection over its pending-output limit: no `error` (it could not be
    /// read), and the signals it has not begun to receive are dropped, so its close frame
    /// follows whole frames when it reads again.
    mutating func overflowed() -> [SignalSocketAction] {
        if case .closed = stage { return [] }
        return leave() + [.close(code: WebSocketCloseCode.policyViolation, reason: SignalingErrorCode.rateLimited.rawValue, discardingUnsentOutput: true)]
    }

    /// SIGTERM: 1001 `shutting_down`, no `error` first (§13.1).
    mutating func shutDown() -> [SignalSocketAction] {
        if case .closed = stage { return [] }
        return leave() + [.close(code: WebSocketCloseCode.goingAway, reason: "shutting_down", discardingUnsentOutput: false)]
    }

    /// The connection is gone, whoever closed it (§6.1 step 4).
    mutating func closed() -> [SignalSocketAction] { leave() }

    static func closeCode(for code: SignalingErrorCode) -> UInt16 {
        switch code {
        case .unavailable: WebSocketCloseCode.tryAgainLater
        case .tooLarge: WebSocketCloseCode.messageTooBig
        case .internal: WebSocketCloseCode.internalError
        default: WebSocketCloseCode.policyViolation
        }
    }

    /// Presence and reservation removed at once, an issuance in flight abandoned (§6.1 step 4):
    /// whatever answers later finds the connection closed and is discarded. A reservation the
    /// directory refused was never this connection's to release.
    private mutating func leave() -> [SignalSocketAction] {
        var actions: [SignalSocketAction] = []
        switch stage {
        case let .pending(id, registration):
            if registration == .issuing { actions.append(.abandonIssuance) }
            if registration != .reserving { actions.append(.release(id)) }
        case let .registered(id):
            actions.append(.release(id))
        case .challenged, .closed:
            break
        }
        stage = .closed
        return actions
    }
}
