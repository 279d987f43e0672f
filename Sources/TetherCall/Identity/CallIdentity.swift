public import TetherCrypto
public import TetherWire

/// A calling identity (signaling.md §3): the Ed25519 ID key, whose public half is the ID, and the
/// separately generated X25519 agreement key it signs (§3.2), which is the Noise static key of
/// every call. Stored as the 64 bytes of §3.3: Ed25519 seed ‖ X25519 private key.
public struct CallIdentity: Sendable {
    /// The stored form's length: a 32-byte Ed25519 seed and a 32-byte X25519 private key (§3.3).
    public static let storedByteCount = 64

    let signingKey: Ed25519.PrivateKey
    /// The X25519 agreement key: every call's Noise static key (§3.2, §9.1).
    public let agreementKey: X25519.PrivateKey
    /// The ID: the Ed25519 public key, as contacts know it (§3.1).
    public let id: SignalingID
    /// `identitySig` (§3.2): the ID key's signature over the binding of the agreement key. Ed25519
    /// is deterministic, so it is computed once and is the same on every offer and answer.
    public let identitySignature: [UInt8]

    /// A new identity with fresh keys from the CSPRNG.
    public init() {
        self.init(signingKey: Ed25519.PrivateKey(), agreementKey: X25519.PrivateKey())
    }

    /// The identity of stored keys: `seed ‖ agreement private key` (64 bytes, §3.3).
    public init(stored bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.storedByteCount else { throw CryptoError.invalidKeySize(expected: Self.storedByteCount, actual: bytes.count) }
        self.init(signingKey: try Ed25519.PrivateKey(seed: Array(bytes[0..<32])),
                  agreementKey: try X25519.PrivateKey(rawRepresentation: Array(bytes[32..<64])))
    }

    /// The identity of these two keys; the binding signature is computed here.
    public init(signingKey: Ed25519.PrivateKey, agreementKey: X25519.PrivateKey) {
        self.signingKey = signingKey
        self.agreementKey = agreementKey
        id = SignalingID(key: signingKey.publicKey.rawRepresentation)
        identitySignature = signingKey.signature(for: SignalingTranscript.identityBinding(agreementKey: agreementKey.publicKey.rawRepresentation))
    }

    /// The 64 bytes to store (owner-only): secret.
    public var stored: [UInt8] { signingKey.seed + agreementKey.rawRepresentation }

    /// The agreement key's public half, as `agreementKey` in offers and answers.
    public var agreementPublicKey: [UInt8] { agreementKey.publicKey.rawRepresentation }

    /// An Ed25519 signature by the ID key (registration and signal strings, §5.7).
    public func sign(_ message: [UInt8]) -> [UInt8] { signingKey.signature(for: message) }

    /// The `register` answering `challenge` exactly as the server sent it (§5.2).
    public func register(challenge: String) -> RegisterMessage {
        RegisterMessage(id: id, signature: sign(SignalingTranscript.register(challenge: challenge, id: id)))
    }

    /// A signed `signal` envelope from this identity (§5.4) over `body`, the b64std of the body's
    /// JSON bytes.
    public func signal(_ kind: SignalKind, to: SignalingID, call: CallUUID, body: String) -> SignalMessage {
        let signature = sign(SignalingTranscript.signal(kind: kind, from: id, to: to, call: call, body: body))
        return SignalMessage(kind: kind, from: id, to: to, call: call, body: body, signature: signature)
    }
}

/// Checks on what another identity signed (§3.2, §7.2): a peer's key is used only after its
/// signature verifies under the ID the user selected or accepted.
public enum IdentityVerification {
    /// The ID's Ed25519 key, or nil when the 32 bytes are not a valid public key (§3.1: such an
    /// ID cannot be selected, and nothing it "signed" verifies).
    public static func signingKey(of id: SignalingID) -> Ed25519.PublicKey? {
        let key = id.key
        guard Ed25519.isValidPublicKeyEncoding(key) else { return nil }
        return try? Ed25519.PublicKey(rawRepresentation: key)
    }

    /// `sig` verifies over the signal string under `from`'s key.
    public static func isAuthentic(_ signal: SignalMessage) -> Bool {
        guard let key = signingKey(of: signal.from) else { return false }
        return key.isValidSignature(signal.signature, for: signal.signedBytes)
    }

    /// The peer's agreement key, once `identitySig` verifies over its binding under `id` and the
    /// key is usable: not all zero, and its Diffie-Hellman result with `local` is not all zero (a
    /// low-order point, §3.2). Nil otherwise.
    public static func agreementKey(_ key: [UInt8], signature: [UInt8], of id: SignalingID,
                                    local: X25519.PrivateKey) -> X25519.PublicKey? {
        guard key.count == X25519.keyByteCount, signature.count == Ed25519.signatureByteCount,
              let signer = signingKey(of: id),
              signer.isValidSignature(signature, for: SignalingTranscript.identityBinding(agreementKey: key)),
              !key.allSatisfy({ $0 == 0 }),
              let publicKey = try? X25519.PublicKey(rawRepresentation: key),
              (try? local.sharedSecret(with: publicKey, rejectingZero: true)) != nil else { return nil }
        return publicKey
    }
}
