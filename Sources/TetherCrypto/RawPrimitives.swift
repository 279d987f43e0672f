import COpenSSL

/// The building blocks of ChaCha20-Poly1305, exposed only so RFC 8439's block, stream and
/// one-time-MAC vectors can be checked against the same OpenSSL code the AEAD runs.
/// Production code uses `AEAD`; these need `@_spi(RawPrimitives) import TetherCrypto`.
@_spi(RawPrimitives)
public enum ChaCha20 {
    /// XORs `input` with the ChaCha20 keystream starting at block `counter` (RFC 8439 §2.4).
    public static func apply(key: [UInt8], nonce: [UInt8], counter: UInt32, _ input: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeySize(expected: 32, actual: key.count) }
        guard nonce.count == 12 else { throw .invalidNonceSize(expected: 12, actual: nonce.count) }
        // OpenSSL's 16-byte ChaCha20 IV is the little-endian block counter followed by the nonce.
        let iv = withUnsafeBytes(of: counter.littleEndian) { [UInt8]($0) } + nonce
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .library("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        try check(EVP_EncryptInit_ex2(ctx, OpenSSL.chacha20, key, iv, nil), "EVP_EncryptInit_ex2(ChaCha20)")
        var output = [UInt8](repeating: 0, count: input.count)
        var length: Int32 = 0
        if !input.isEmpty {
            try check(EVP_EncryptUpdate(ctx, &output, &length, input, Int32(input.count)), "EVP_EncryptUpdate(ChaCha20)")
        }
        return output
    }

    /// One 64-byte keystream block (RFC 8439 §2.3).
    public static func block(key: [UInt8], nonce: [UInt8], counter: UInt32) throws(CryptoError) -> [UInt8] {
        try apply(key: key, nonce: nonce, counter: counter, [UInt8](repeating: 0, count: 64))
    }
}

@_spi(RawPrimitives)
public enum Poly1305 {
    /// The 16-byte one-time authenticator of `message` under a 32-byte one-time key (RFC 8439 §2.5).
    public static func authenticate(key: [UInt8], message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeySize(expected: 32, actual: key.count) }
        let context = key.withUnsafeBytes { MACContext.keyed(OpenSSL.poly1305, key: $0, params: nil) }
        guard let context else { throw .library("EVP_MAC_init(POLY1305)") }
        context.update(message)
        return context.finalize(count: 16)
    }

    /// The one-time key ChaCha20-Poly1305 derives from its key and nonce (RFC 8439 §2.6).
    public static func keyGeneration(key: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        Array(try ChaCha20.block(key: key, nonce: nonce, counter: 0).prefix(32))
    }
}
