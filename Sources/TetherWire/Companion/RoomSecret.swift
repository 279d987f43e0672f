public import TetherCrypto

/// The 32-byte secret a phone mints per pairing and couriers to the Mac inside Noise.
/// Everything a device proves to the relay, and the push-path keys, derive from it.
public struct RoomSecret: Sendable, Hashable {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidKeySize(expected: Self.byteCount, actual: bytes.count) }
        self.bytes = bytes
    }

    /// A fresh random secret.
    public static func generate() -> RoomSecret { RoomSecret(trusted: SecureRandom.bytes(byteCount)) }

    private init(trusted bytes: [UInt8]) { self.bytes = bytes }

    /// The Ed25519 join-signing key: seed = HKDF-SHA256(roomSecret, salt none,
    /// info "relay-auth-ed25519", 32). Derived on demand; never stored.
    public func joinSigningKey() -> Ed25519.PrivateKey {
        // 32 bytes of HKDF output are always a valid seed, and HKDF cannot fail at L = 32.
        try! Ed25519.PrivateKey(seed: derive(info: "relay-auth-ed25519"))
    }

    /// The verifier V the relay stores at registration: the raw Ed25519 public key.
    public var verifier: [UInt8] { joinSigningKey().publicKey.rawRepresentation }

    func derive(info: String) -> [UInt8] {
        try! HKDF.deriveKey(.sha256, inputKeyMaterial: bytes, info: Array(info.utf8), outputByteCount: 32)
    }
}
