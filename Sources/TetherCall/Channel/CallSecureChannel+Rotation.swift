import TetherSync
import TetherNoise

extension CallSecureChannel {
    /// This side starts a rotation as the NN initiator (§10 step 1): `ROTATE_INIT` under the
    /// current epoch, then nothing else until `ROTATE_RESP`.
    mutating func startRotation(now: MonotonicInstant) throws(CallChannelFailure) {
        var handshake = try makeRotationHandshake(role: .initiator)
        let message = try Self.rotationStep { () throws(NoiseError) in try handshake.writeMessage() }
        try commitTransport([Self.rotateInit] + message)
        pendingRotation = handshake
    }

    /// The peer's `ROTATE_INIT`. While this side's own request is pending, the caller's wins:
    /// the caller ignores the callee's (once — the callee never sends two), and the callee drops
    /// its own and answers, keeping what it held (§10).
    mutating func receiveRotationRequest(_ message: [UInt8], now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        if pendingRotation != nil {
            guard role == .responder else {
                guard !ignoredPeerRequest else { throw .rotation(.repeatedRequest) }
                ignoredPeerRequest = true
                return
            }
            pendingRotation = nil
        }
        var handshake = try makeRotationHandshake(role: .responder)
        try Self.readRotation(message, into: &handshake)
        let reply = try Self.rotationStep { () throws(NoiseError) in try handshake.writeMessage() }
        try commitTransport([Self.rotateResponse] + reply)
        try switchEpoch(handshake, now: now, into: &actions)
    }

    /// The answer to this side's request (§10 step 3).
    mutating func receiveRotationResponse(_ message: [UInt8], now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        guard var handshake = pendingRotation else { throw .rotation(.responseWithoutRequest) }
        try Self.readRotation(message, into: &handshake)
        try switchEpoch(handshake, now: now, into: &actions)
    }

    /// Both directions move to the NN Split's keys at nonce 0; the old CipherStates and the NN
    /// state go at once (§10 step 4). Held messages then leave under the new keys.
    private mutating func switchEpoch(_ handshake: HandshakeState, now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        transport = try Self.rotationStep { () throws(NoiseError) in try handshake.transportChannel() }
        pendingRotation = nil
        ignoredPeerRequest = false
        epoch += 1
        epochStartedAt = now
        sentUnderEpoch = 0
        actions.append(.rotated(epoch: epoch))
        let release = held
        held = []
        for plaintext in release { try sendMessage(plaintext, now: now) }
    }

    /// NN payloads are empty (§10): one that carries a payload is malformed.
    private static func readRotation(_ message: [UInt8], into handshake: inout HandshakeState) throws(CallChannelFailure) {
        let payload = try rotationStep { () throws(NoiseError) in try handshake.readMessage(message) }
        guard payload.isEmpty else { throw .rotation(.malformedMessage) }
    }

    /// The NN handshake creating the next epoch, bound to the session and the KK roles (§10).
    private mutating func makeRotationHandshake(role noiseRole: NoiseRole) throws(CallChannelFailure) -> HandshakeState {
        guard let sessionID else { throw .unexpectedFrame }
        let prologue = Self.rotationPrologue(sessionID: sessionID, initiator: initiatorID, responder: responderID, epoch: epoch + 1)
        let fixed = fixedEphemerals?.nextRotation()
        return try Self.rotationStep { () throws(NoiseError) in
            try Self.handshakeState(Self.nn, role: noiseRole, prologue: prologue, staticKey: nil, remoteStaticKey: nil, fixedEphemeral: fixed)
        }
    }

    private static func rotationStep<T>(_ body: () throws(NoiseError) -> T) throws(CallChannelFailure) -> T {
        do { return try body() } catch { throw .rotation(.malformedMessage) }
    }
}
