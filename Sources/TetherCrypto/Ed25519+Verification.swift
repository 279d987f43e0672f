import COpenSSL
import CSodium

extension Ed25519 {
    /// The verdict on canonical A and R: OpenSSL's, reached through libsodium where they agree.
    ///
    /// libsodium computes the same cofactorless check (R == [S]B − [k]A over the received
    /// encodings, S < L) about twice as fast as OpenSSL 3.0, and the signaling server verifies
    /// every `register` and every `signal`. What libsodium accepts, OpenSSL accepts. It refuses
    /// more only in one place: an A or R of small order, which OpenSSL (and RFC 8032) check like
    /// any other point, and whose outcome the CCTV vectors pin. Only then does OpenSSL answer,
    /// so a forged signature costs one fast verification, not two.
    static func verify(_ signature: UnsafeRawBufferPointer, over message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) -> Bool {
        if sodiumReady {
            let status = crypto_sign_verify_detached(signature.nonNullBase,
                                                     message.nonNullBase,
                                                     UInt64(message.count), key.nonNullBase)
            if status == 0 { return true }
            guard hasSmallOrder(UnsafeRawBufferPointer(rebasing: signature[..<32])) || hasSmallOrder(key) else { return false }
        }
        return openSSLVerify(signature, over: message, key: key)
    }

    /// `sodium_init` once per process; it is safe to call from any thread, and libsodium's
    /// functions may be used concurrently after it. Should it ever fail, OpenSSL answers alone.
    private static let sodiumReady: Bool = sodium_init() >= 0

    /// OpenSSL's verdict, with a key imported for this one call (the rare path: libsodium
    /// answers the rest).
    static func openSSLVerify(_ signature: UnsafeRawBufferPointer, over message: UnsafeRawBufferPointer, key raw: UnsafeRawBufferPointer) -> Bool {
        guard let key = PKey.rawPublic("ED25519", raw), let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit_ex(ctx, nil, nil, nil, nil, key.pkey, nil) == 1 else {
            OpenSSL.clearErrors()
            return false
        }
        let status = EVP_DigestVerify(ctx, signature.nonNullBase, signature.count, message.nonNullBase, message.count)
        if status != 1 { OpenSSL.clearErrors() }
        return status == 1
    }

    /// The y coordinates (little-endian, canonical) of the eight points of small order: 0 (order
    /// 4), 1 (the identity), the two of order 8, and p − 1 (order 2). A point has small order
    /// exactly when its y is one of these, whatever the sign bit says about x.
    static let smallOrderY: [[UInt8]] = [
        [UInt8](repeating: 0, count: 32),
        [1] + [UInt8](repeating: 0, count: 31),
        [0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
         0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05],
        [0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
         0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a],
        [0xec] + [UInt8](repeating: 0xff, count: 30) + [0x7f],
    ]

    /// Whether a canonical encoding is a point of small order (its y in `smallOrderY`).
    static func hasSmallOrder(_ encoding: UnsafeRawBufferPointer) -> Bool {
        guard encoding.count == keyByteCount else { return false }
        return smallOrderY.contains { y in
            encoding[31] & 0x7f == y[31] && (0..<31).allSatisfy { encoding[$0] == y[$0] }
        }
    }
}
