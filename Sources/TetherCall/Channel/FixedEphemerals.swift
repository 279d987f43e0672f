import TetherCrypto

/// Ephemeral keys fixed in advance, so the §12 vectors are reproducible. Reusing an ephemeral
/// key destroys Noise's security: only the `@_spi(NoiseTesting)` initializer sets these.
struct FixedEphemerals: Sendable {
    var handshake: X25519.PrivateKey?
    /// One per NN handshake this side takes part in, in order; fresh keys once used up.
    var rotations: [X25519.PrivateKey]

    mutating func nextRotation() -> X25519.PrivateKey? {
        rotations.isEmpty ? nil : rotations.removeFirst()
    }
}
