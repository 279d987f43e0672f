import COpenSSL

/// X25519 Diffie-Hellman (RFC 7748) with raw 32-byte keys.
public enum X25519 {
    public static let keyByteCount = 32

    public struct PrivateKey: Sendable {
        let key: PKey
        /// The clamped scalar is applied inside OpenSSL; the raw bytes are stored as given.
        public let rawRepresentation: [UInt8]
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() {
            key = PKey.generate("X25519")
            rawRepresentation = key.rawPrivateBytes(count: keyByteCount)
            publicKey = PublicKey(trusted: key.rawPublicBytes(count: keyByteCount))
        }

        /// A key from its 32 raw bytes (RFC 7748 scalar, clamped on use).
        public init(rawRepresentation bytes: some BytesView) throws(CryptoError) {
            let raw = bytes.byteArray
            guard raw.count == keyByteCount else { throw .invalidKeySize(expected: keyByteCount, actual: raw.count) }
            guard let key = raw.withUnsafeBytes({ PKey.rawPrivate("X25519", $0) }) else { throw .invalidPrivateKey }
            self.key = key
            rawRepresentation = raw
            publicKey = PublicKey(trusted: key.rawPublicBytes(count: keyByteCount))
        }

        /// The shared secret with `peer`.
        ///
        /// - Parameter rejectingZero: refuse a peer whose point has small order, which makes the
        ///   secret all zeros (RFC 7748 §6.1: protocols that need contributory behaviour check it).
        public func sharedSecret(with peer: PublicKey, rejectingZero: Bool = true) throws(CryptoError) -> [UInt8] {
            var secret = [UInt8](repeating: 0, count: keyByteCount)
            let status = peer.rawRepresentation.withUnsafeBytes { peerBytes -> Int32 in
                guard let peerKey = PKey.rawPublic("X25519", peerBytes) else { return -2 }
                guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key.pkey, nil) else { return 0 }
                defer { EVP_PKEY_CTX_free(ctx) }
                guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, peerKey.pkey) == 1 else { return 0 }
                var length = keyByteCount
                return secret.withUnsafeMutableBufferPointer { EVP_PKEY_derive(ctx, $0.baseAddress, &length) }
            }
            if status != 1 { OpenSSL.clearErrors() }
            switch status {
            case 1: break
            case -2: throw .invalidPublicKey
            default:
                // OpenSSL refuses to output the all-zero secret itself.
                throw .zeroSharedSecret
            }
            if rejectingZero, secret.allSatisfy({ $0 == 0 }) { throw .zeroSharedSecret }
            return secret
        }
    }

    public struct PublicKey: Sendable, Hashable {
        /// The 32-byte u-coordinate, little-endian, as RFC 7748 encodes it.
        public let rawRepresentation: [UInt8]

        /// Any 32 bytes are a valid encoding (the top bit is masked on use, per RFC 7748 §5).
        public init(rawRepresentation bytes: some BytesView) throws(CryptoError) {
            let raw = bytes.byteArray
            guard raw.count == keyByteCount else { throw .invalidKeySize(expected: keyByteCount, actual: raw.count) }
            rawRepresentation = raw
        }

        init(trusted raw: [UInt8]) { rawRepresentation = raw }
    }
}
