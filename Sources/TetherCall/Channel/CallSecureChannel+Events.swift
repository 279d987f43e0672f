public import TetherSync
import TetherNoise

extension CallSecureChannel {
    /// The caller writes handshake message 1 (§9.3). Nothing for the callee, which waits for it.
    public mutating func start(now: MonotonicInstant) -> [CallChannelAction] {
        guard role == .initiator, case .awaitingHandshake = phase else { return [] }
        return run(now: now) { (channel: inout CallSecureChannel, _) throws(CallChannelFailure) in
            var handshake = try channel.makeHandshake()
            let message = try Self.handshakeStep { () throws(NoiseError) in try handshake.writeMessage() }
            try channel.commit(Self.handshakeFrame, message)
            channel.phase = .handshaking(handshake)
        }
    }

    /// One data-channel message from the peer.
    public mutating func receive(_ frame: [UInt8], now: MonotonicInstant) -> [CallChannelAction] {
        run(now: now) { (channel: inout CallSecureChannel, actions) throws(CallChannelFailure) in
            try channel.handle(frame, now: now, into: &actions)
        }
    }

    /// Sends a text (§9.5); the peer's receipt comes back as `.deliver(.receipt)`. Refused before
    /// key confirmation and when the text breaks a limit the peer enforces.
    public mutating func sendText(_ text: String, id: MessageID, sentAt: Int64, now: MonotonicInstant) throws(CallSendError) -> [CallChannelAction] {
        try checkOpen()
        let payload = CallPayload.text(id: id, text: text, sentAt: sentAt)
        if let problem = payload.sendingProblem { throw .invalidPayload(problem) }
        return run(now: now) { (channel: inout CallSecureChannel, _) throws(CallChannelFailure) in
            channel.awaitingReceipt.insert(id)
            try channel.sendMessage(payload.encoded, now: now)
        }
    }

    /// The user asked for fresh keys (§10). Nothing new while a rotation is already pending.
    public mutating func rotate(now: MonotonicInstant) throws(CallSendError) -> [CallChannelAction] {
        try checkOpen()
        return run(now: now) { (channel: inout CallSecureChannel, _) throws(CallChannelFailure) in
            if channel.pendingRotation == nil { try channel.startRotation(now: now) }
        }
    }

    /// Time passed: releases paced frames and enforces the confirmation timeout and the session
    /// limit. Call it at `nextTick`.
    public mutating func tick(now: MonotonicInstant) -> [CallChannelAction] {
        run(now: now) { _, _ throws(CallChannelFailure) in }
    }

    private func checkOpen() throws(CallSendError) {
        guard failure == nil else { throw .closed }
        guard isAuthenticated else { throw .notAuthenticated }
    }
}
