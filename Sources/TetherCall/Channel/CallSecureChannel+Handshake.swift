import TetherSync
import TetherNoise

extension CallSecureChannel {
    /// A handshake frame: message 1 for the callee, message 2 for the caller that wrote message
    /// 1; anything else is out of place (§9.2).
    mutating func receiveHandshake(_ message: [UInt8], now: MonotonicInstant) throws(CallChannelFailure) {
        switch (role, phase) {
        case (.responder, .awaitingHandshake):
            var handshake = try makeHandshake()
            try Self.read(message, into: &handshake)
            let reply = try Self.handshakeStep { () throws(NoiseError) in try handshake.writeMessage() }
            try commit(Self.handshakeFrame, reply)
            try split(handshake, now: now)
        case (.initiator, .handshaking(var handshake)):
            try Self.read(message, into: &handshake)
            try split(handshake, now: now)
        default:
            throw .unexpectedFrame
        }
    }

    /// KK payloads are empty (§9.1): a message that carries one is refused like a forged one.
    private static func read(_ message: [UInt8], into handshake: inout HandshakeState) throws(CallChannelFailure) {
        let payload = try handshakeStep { () throws(NoiseError) in try handshake.readMessage(message) }
        guard payload.isEmpty else { throw .handshakeFailed }
    }

    /// Split (§9.3): the handshake state, ephemerals included, goes with this call; only `h`
    /// stays, as the session ID. Then this side's key confirmation.
    private mutating func split(_ handshake: HandshakeState, now: MonotonicInstant) throws(CallChannelFailure) {
        let keys = try Self.handshakeStep { () throws(NoiseError) in try handshake.transportChannel() }
        transport = keys
        sessionID = keys.handshakeHash
        epochStartedAt = now
        phase = .confirming
        try commitTransport(Self.confirmation)
    }

    /// The KK handshake of this call (§9.1).
    func makeHandshake() throws(CallChannelFailure) -> HandshakeState {
        let prologue = Self.prologue(callID: callID, initiator: initiatorID, responder: responderID)
        let noiseRole: NoiseRole = role == .initiator ? .initiator : .responder
        let fixed = fixedEphemerals?.handshake
        return try Self.handshakeStep { () throws(NoiseError) in
            try Self.handshakeState(Self.kk, role: noiseRole, prologue: prologue, staticKey: localAgreementKey,
                                    remoteStaticKey: remoteAgreementKey, fixedEphemeral: fixed)
        }
    }

    static func handshakeStep<T>(_ body: () throws(NoiseError) -> T) throws(CallChannelFailure) -> T {
        do { return try body() } catch { throw .handshakeFailed }
    }
}
