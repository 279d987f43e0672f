import COpenSSL

/// Ed25519 (RFC 8032, pure) with raw 32-byte keys and 64-byte signatures.
///
/// Verification accepts exactly what OpenSSL's does (cofactorless equation, S < L), made strict
/// about encodings: OpenSSL 3.0 accepts a non-canonical public key A, which RFC 8032
/// §5.1.3/§5.1.7 says must fail to decode, so A and R are checked for canonical encoding first.
/// libsodium answers first, for speed (`Ed25519+Verification.swift`).
public enum Ed25519 {
    public static let keyByteCount = 32
    public static let signatureByteCount = 64

    public struct PrivateKey: Sendable {
        let key: PKey
        /// The 32-byte seed (RFC 8032's private key).
        public let seed: [UInt8]
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() {
            let seed = SecureRandom.bytes(keyByteCount)
            // A 32-byte seed is always a valid Ed25519 private key.
            try! self.init(seed: seed)
        }

        /// The key whose seed is `seed` (32 bytes). Deterministic: the same seed, the same key.
        public init(seed bytes: some BytesView) throws(CryptoError) {
            let raw = bytes.byteArray
            guard raw.count == keyByteCount else { throw .invalidKeySize(expected: keyByteCount, actual: raw.count) }
            guard let key = raw.withUnsafeBytes({ PKey.rawPrivate("ED25519", $0) }) else { throw .invalidPrivateKey }
            self.key = key
            seed = raw
            guard let publicKey = try? PublicKey(rawRepresentation: key.rawPublicBytes(count: keyByteCount)) else {
                throw .invalidPrivateKey
            }
            self.publicKey = publicKey
        }

        /// The deterministic signature of `message`.
        public func signature(for message: some BytesView) -> [UInt8] {
            var signature = [UInt8](repeating: 0, count: signatureByteCount)
            let status = message.withUnsafeBytes { message -> Int32 in
                guard let ctx = EVP_MD_CTX_new() else { return 0 }
                defer { EVP_MD_CTX_free(ctx) }
                guard EVP_DigestSignInit_ex(ctx, nil, nil, nil, nil, key.pkey, nil) == 1 else { return 0 }
                var length = signatureByteCount
                return signature.withUnsafeMutableBufferPointer {
                    EVP_DigestSign(ctx, $0.baseAddress, &length, message.nonNullBase, message.count)
                }
            }
            guard status == 1 else { fatalError("Ed25519 signing failed") }
            return signature
        }
    }

    public struct PublicKey: Sendable, Hashable {
        public let rawRepresentation: [UInt8]

        /// A verifier key from its 32-byte encoding. A wrong length throws; a 32-byte string that
        /// is not a valid point is accepted here and simply never verifies. Nothing is imported
        /// into a library until a signature is checked: the signaling server holds one of these
        /// per registered client.
        public init(rawRepresentation bytes: some BytesView) throws(CryptoError) {
            let raw = bytes.byteArray
            guard raw.count == keyByteCount else { throw .invalidKeySize(expected: keyByteCount, actual: raw.count) }
            rawRepresentation = raw
        }

        /// True only for a 64-byte signature that verifies over `message`.
        public func isValidSignature(_ signature: some BytesView, for message: some BytesView) -> Bool {
            signature.withUnsafeBytes { signature in
                rawRepresentation.withUnsafeBytes { key in
                    guard signature.count == signatureByteCount,
                          Ed25519.isCanonicalPointEncoding(UnsafeRawBufferPointer(rebasing: signature[..<32])),
                          Ed25519.isCanonicalPointEncoding(key) else { return false }
                    return message.withUnsafeBytes { Ed25519.verify(signature, over: $0, key: key) }
                }
            }
        }

        public static func == (a: PublicKey, b: PublicKey) -> Bool { a.rawRepresentation == b.rawRepresentation }
        public func hash(into hasher: inout Swift.Hasher) { hasher.combine(rawRepresentation) }
    }

    /// RFC 8032 §5.1.3: a point encoding decodes only if its y (the low 255 bits, little-endian)
    /// is below p = 2^255 − 19, and it does not set the sign bit of x when x = 0 (y = ±1).
    static func isCanonicalPointEncoding(_ encoding: UnsafeRawBufferPointer) -> Bool {
        guard encoding.count == 32 else { return false }
        let top = encoding[31] & 0x7f
        let middleAllOnes = encoding[1..<31].allSatisfy { $0 == 0xff }
        // y ≥ p: 0x7fff…ff(ed…ff).
        if top == 0x7f, middleAllOnes, encoding[0] >= 0xed { return false }
        guard encoding[31] & 0x80 != 0 else { return true }
        // x = 0 with the sign bit set: y = 1, or y = p − 1 = 0x7fff…ffec.
        let isOne = encoding[0] == 1 && top == 0 && encoding[1..<31].allSatisfy { $0 == 0 }
        let isMinusOne = encoding[0] == 0xec && top == 0x7f && middleAllOnes
        return !(isOne || isMinusOne)
    }
}
