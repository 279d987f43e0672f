public import TetherSync
public import TetherCrypto
public import TetherWire
@_spi(NoiseTesting) import TetherNoise

extension CallSecureChannel {
    /// A channel whose KK ephemeral and first NN ephemerals are fixed (signaling.md §12).
    @_spi(NoiseTesting)
    public init(testingWithHandshakeEphemeral handshakeEphemeral: X25519.PrivateKey, rotationEphemerals: [X25519.PrivateKey],
                role: Role, callID: CallUUID, localID: SignalingID, remoteID: SignalingID,
                localAgreementKey: X25519.PrivateKey, remoteAgreementKey: X25519.PublicKey, now: MonotonicInstant) {
        self.init(role: role, callID: callID, localID: localID, remoteID: remoteID, localAgreementKey: localAgreementKey,
                  remoteAgreementKey: remoteAgreementKey, now: now)
        fixedEphemerals = FixedEphemerals(handshake: handshakeEphemeral, rotations: rotationEphemerals)
    }

    /// The current epoch's raw keys, for the §12 key vectors.
    @_spi(NoiseTesting)
    public var testingTransportKeys: (sending: [UInt8], receiving: [UInt8])? {
        guard let sending = transport?.sending?.testingKey, let receiving = transport?.receiving?.testingKey else { return nil }
        return (sending, receiving)
    }

    /// Every KK and NN handshake state is made here, so the fixed-ephemeral SPI is reached from
    /// this one file, and only when a test set `fixedEphemerals`.
    static func handshakeState(_ noiseProtocol: NoiseProtocol, role: NoiseRole, prologue: [UInt8], staticKey: X25519.PrivateKey?,
                               remoteStaticKey: X25519.PublicKey?, fixedEphemeral: X25519.PrivateKey?) throws(NoiseError) -> HandshakeState {
        guard let fixedEphemeral else {
            return try HandshakeState(noiseProtocol, role: role, prologue: prologue, staticKey: staticKey, remoteStaticKey: remoteStaticKey)
        }
        return try HandshakeState(testingWithFixedEphemeralKey: fixedEphemeral, noiseProtocol, role: role, prologue: prologue,
                                  staticKey: staticKey, remoteStaticKey: remoteStaticKey)
    }
}
