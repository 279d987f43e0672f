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
    /// so a random forgery costs one fast verification, not two; one whose R (or key) has small
    /// order costs an OpenSSL verification, what every signature cost before.
    /// `signature` is 64 bytes and `key` 32, both with canonical point encodings (checked by
    /// the caller).
    static func verify(_ signature: UnsafeRawBufferPointer, over message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) -> Bool {
        assert(signature.count == signatureByteCount && key.count == keyByteCount)
        if sodiumReady {
            let status = crypto_sign_verify_detached(signature.nonNullBase,
                                                     message.nonNullBase,
                                                     UInt64(message.count), key.nonNullBase)
            if status == 0 { return true }
            guard hasSmallOrder(UnsafeRawBufferPointer(rebasing: signature[..<32])) || hasSmallOrder(key) else { return false }
        }
        return openSSLVerify(signature, over: message, key: key)
    }

    /// Whether libsodium answers first: `sodium_init` succeeded (once per process, safe from any
    /// thread) and the library still verifies as 1.0.18 does. The agreement above is a property
    /// of that version's check; should a later libsodium accept what OpenSSL refuses (a
    /// cofactored check would), the fallback could not take the acceptance back, so the library
    /// in use is asked first and OpenSSL answers alone if it disagrees.
    static let sodiumReady: Bool = sodium_init() >= 0 && sodiumVerifiesAsOpenSSL()

    /// RFC 8032's test 1 must verify, and CCTV's vector 6 must not: its A and R have small-order
    /// components and [8](R − [S]B + [k]A) is the identity while R − [S]B + [k]A is not, so a
    /// cofactored verifier accepts it and OpenSSL's cofactorless check does not.
    private static func sodiumVerifiesAsOpenSSL() -> Bool {
        let rfc8032Key = hexConstant("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let rfc8032Signature = hexConstant("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        let residueKey = hexConstant("10eb7c3acfb2bed3e0d6ab89bf5a3d6afddd1176ce4812e38d9fd485058fdb1f")
        let residueSignature = hexConstant("36684ea91032ba5b1dbab2d02f4debc74c3327f2b3802e2e4d371aa42b12b56bc02e2b9e63e385c058bf62b14b3a2b29ccefe8e38ddb536bc3f9865320a3d801")
        let residueMessage = Array("ed25519vectors 10".utf8)
        let empty: [UInt8] = []
        let accepts = empty.withUnsafeBytes { crypto_sign_verify_detached(rfc8032Signature, $0.nonNullBase, 0, rfc8032Key) == 0 }
        let refuses = crypto_sign_verify_detached(residueSignature, residueMessage, UInt64(residueMessage.count), residueKey) != 0
        return accepts && refuses
    }

    private static func hexConstant(_ text: StaticString) -> [UInt8] {
        let digits = Array(text.description.utf8).map { $0 <= 0x39 ? $0 - 0x30 : ($0 | 0x20) - 0x61 + 10 }
        return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }

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
