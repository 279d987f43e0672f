import TetherCrypto
public import TetherStore
public import TetherWire
public import TetherEncoding

/// A signed join to check against the room's stored verifier (relay.md §3.4 step 3.2). It travels
/// with the room's admission query, so the Ed25519 verification runs on the store lane that reads
/// the verifier — a reconnect storm's signature checks never queue up on the loop that splices.
public struct JoinCheck: Sendable, Equatable {
    /// The join transcript (§3.6) the client must have signed: role, nonce, room, origin.
    public let transcript: [UInt8]
    /// The Proof's `sig`, as sent (forgiving base64).
    public let signature: String

    /// A check of `signature` over `transcript`.
    public init(transcript: [UInt8], signature: String) {
        self.transcript = transcript
        self.signature = signature
    }

    /// True when `verifier` (the stored `V`: forgiving base64 of a 32-byte Ed25519 key) signed the
    /// transcript. A verifier or signature that does not decode is simply invalid (`bad signature`).
    public func isValid(for verifier: String) -> Bool {
        guard let key = (try? Base64.decodeForgiving(verifier)).flatMap({ try? Ed25519.PublicKey(rawRepresentation: $0) }),
              let signatureBytes = try? Base64.decodeForgiving(signature) else { return false }
        return key.isValidSignature(signatureBytes, for: transcript)
    }

    /// What the executor answers with the read: whether the stored verifier signed it (false when
    /// there is no verifier or no signature to check).
    public static func verdict(_ check: JoinCheck?, against read: AdmissionRead) -> Bool {
        guard let check, let verifier = read.state.verifier else { return false }
        return check.isValid(for: verifier)
    }
}
