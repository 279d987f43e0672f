public import TetherCrypto

/// The two CipherStates a completed handshake yields, oriented for this side, plus the
/// handshake hash (channel binding) and the peer's static key.
public struct NoiseTransport: Sendable {
    /// Encrypts what this side sends; nil for the responder of a one-way pattern.
    public var sending: CipherState?
    /// Decrypts what this side receives; nil for the initiator of a one-way pattern.
    public var receiving: CipherState?
    public let handshakeHash: [UInt8]
    public let remoteStaticKey: X25519.PublicKey?

    /// Encrypts one transport message (empty associated data).
    public mutating func encrypt(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard sending != nil else { throw .outOfTurn }
        return try sending!.encrypt(plaintext)
    }

    /// Decrypts one transport message; any failure poisons the receiving state.
    public mutating func decrypt(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard receiving != nil else { throw .outOfTurn }
        guard message.count <= HandshakeState.maxMessageLength else {
            throw .messageTooLarge(message.count)
        }
        return try receiving!.decrypt(message)
    }
}
