import COpenSSL

/// An AEAD cipher bound to one key: ChaCha20-Poly1305 (RFC 8439) or AES-256-GCM, both with
/// a 96-bit nonce and a 128-bit tag.
///
/// The OpenSSL context is keyed once and reused, so a message costs only the IV setup and the
/// cipher itself. It is a value type: `seal` and `open` are `mutating` and copy the context
/// first when another copy shares it, so copies never interfere (the way `Array` does it).
public struct AEAD: @unchecked Sendable { // the EVP_CIPHER context is copied before any mutation when shared, as Array does
    public enum Algorithm: Sendable, Hashable {
        case chaCha20Poly1305
        case aes256GCM

        var cipher: OpaquePointer {
            switch self {
            case .chaCha20Poly1305: OpenSSL.chacha20Poly1305
            case .aes256GCM: OpenSSL.aes256GCM
            }
        }
    }

    public static let keyByteCount = 32
    public static let nonceByteCount = 12
    public static let tagByteCount = 16

    public let algorithm: Algorithm
    private var context: AEADContext

    /// Binds `key` (32 bytes).
    public init(_ algorithm: Algorithm, key: some BytesView) throws(CryptoError) {
        let count = key.byteCount
        guard count == Self.keyByteCount else { throw .invalidKeySize(expected: Self.keyByteCount, actual: count) }
        self.algorithm = algorithm
        context = try AEADContext(algorithm, key: key.byteArray)
    }

    private mutating func uniqueContext() throws(CryptoError) -> AEADContext {
        if !isKnownUniquelyReferenced(&context) { context = try AEADContext(algorithm, key: context.key) }
        return context
    }

    // MARK: Pointer interface (no allocation)

    /// Encrypts `plaintext` into `ciphertext` (same length) and writes the tag into `tag`.
    /// `ciphertext` may be the same memory as `plaintext` (in-place), but must not partly overlap it.
    public mutating func seal(plaintext: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
                              authenticating aad: UnsafeRawBufferPointer,
                              ciphertext: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard ciphertext.count == plaintext.count else { throw .invalidParameter("ciphertext buffer length") }
        guard tag.count == Self.tagByteCount else { throw .invalidTagSize(expected: Self.tagByteCount, actual: tag.count) }
        try uniqueContext().run(encrypt: true, input: plaintext, nonce: nonce, aad: aad, output: ciphertext, tag: tag)
    }

    /// Verifies `tag` and decrypts `ciphertext` into `plaintext` (same length). On failure the
    /// output buffer is zeroed, so no unauthenticated plaintext is ever left behind.
    public mutating func open(ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                              nonce: UnsafeRawBufferPointer, authenticating aad: UnsafeRawBufferPointer,
                              plaintext: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard plaintext.count == ciphertext.count else { throw .invalidParameter("plaintext buffer length") }
        guard tag.count == Self.tagByteCount else { throw .invalidTagSize(expected: Self.tagByteCount, actual: tag.count) }
        let tagCopy = UnsafeMutableRawBufferPointer(mutating: tag)
        try uniqueContext().run(encrypt: false, input: ciphertext, nonce: nonce, aad: aad, output: plaintext, tag: tagCopy)
    }

    // MARK: Array interface

    /// Combined form: ciphertext ‖ 16-byte tag.
    public mutating func seal(_ plaintext: some BytesView, nonce: some BytesView,
                              authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> [UInt8] {
        let context = try uniqueContext()
        var failure: CryptoError?
        let output = plaintext.withUnsafeBytes { p in
            nonce.withUnsafeBytes { n in
                aad.withUnsafeBytes { a in
                    [UInt8](unsafeUninitializedCapacity: p.count + Self.tagByteCount) { buffer, count in
                        let out = UnsafeMutableRawBufferPointer(buffer)
                        failure = context.attempt(encrypt: true, input: p, nonce: n, aad: a,
                                                  output: UnsafeMutableRawBufferPointer(rebasing: out[..<p.count]),
                                                  tag: UnsafeMutableRawBufferPointer(rebasing: out[p.count...]))
                        count = failure == nil ? p.count + Self.tagByteCount : 0
                    }
                }
            }
        }
        if let failure { throw failure }
        return output
    }

    /// Detached form: (ciphertext, 16-byte tag).
    public mutating func sealDetached(_ plaintext: some BytesView, nonce: some BytesView,
                                      authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        var combined = try seal(plaintext, nonce: nonce, authenticating: aad)
        let tag = Array(combined[(combined.count - Self.tagByteCount)...])
        combined.removeLast(Self.tagByteCount)
        return (combined, tag)
    }

    /// Opens the combined form (ciphertext ‖ tag).
    public mutating func open(_ combined: some BytesView, nonce: some BytesView,
                              authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> [UInt8] {
        let context = try uniqueContext()
        let result: Result<[UInt8], CryptoError> = combined.withUnsafeBytes { c in
            guard c.count >= Self.tagByteCount else { return .failure(.authenticationFailure) }
            let count = c.count - Self.tagByteCount
            return Self.open(context, ciphertext: UnsafeRawBufferPointer(rebasing: c[..<count]),
                             tag: UnsafeRawBufferPointer(rebasing: c[count...]), nonce: nonce, aad: aad)
        }
        return try result.get()
    }

    /// Opens the detached form.
    public mutating func open(ciphertext: some BytesView, tag: some BytesView, nonce: some BytesView,
                              authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> [UInt8] {
        let context = try uniqueContext()
        let result: Result<[UInt8], CryptoError> = ciphertext.withUnsafeBytes { c in
            tag.withUnsafeBytes { t in
                guard t.count == Self.tagByteCount else { return .failure(.authenticationFailure) }
                return Self.open(context, ciphertext: c, tag: t, nonce: nonce, aad: aad)
            }
        }
        return try result.get()
    }

    private static func open(_ context: AEADContext, ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                             nonce: some BytesView, aad: some BytesView) -> Result<[UInt8], CryptoError> {
        var failure: CryptoError?
        let plaintext = nonce.withUnsafeBytes { n in
            aad.withUnsafeBytes { a in
                [UInt8](unsafeUninitializedCapacity: ciphertext.count) { buffer, count in
                    failure = context.attempt(encrypt: false, input: ciphertext, nonce: n, aad: a,
                                              output: UnsafeMutableRawBufferPointer(buffer),
                                              tag: UnsafeMutableRawBufferPointer(mutating: tag))
                    // On failure the buffer was zeroed; it is discarded either way.
                    count = failure == nil ? ciphertext.count : 0
                }
            }
        }
        if let failure { return .failure(failure) }
        return .success(plaintext)
    }

    // MARK: One-shot helpers

    /// Seals with a fresh context (for rare, one-off messages).
    public static func seal(_ algorithm: Algorithm, key: some BytesView, nonce: some BytesView,
                            plaintext: some BytesView, authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> [UInt8] {
        var cipher = try AEAD(algorithm, key: key)
        return try cipher.seal(plaintext, nonce: nonce, authenticating: aad)
    }

    /// Opens with a fresh context (for rare, one-off messages).
    public static func open(_ algorithm: Algorithm, key: some BytesView, nonce: some BytesView,
                            combined: some BytesView, authenticating aad: some BytesView = [UInt8]()) throws(CryptoError) -> [UInt8] {
        var cipher = try AEAD(algorithm, key: key)
        return try cipher.open(combined, nonce: nonce, authenticating: aad)
    }
}

/// One keyed EVP_CIPHER_CTX.
final class AEADContext {
    let key: [UInt8]
    private let ctx: OpaquePointer

    init(_ algorithm: AEAD.Algorithm, key: [UInt8]) throws(CryptoError) {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .library("EVP_CIPHER_CTX_new") }
        // Keyed once here; each message only sets the IV. The 12-byte IV is both ciphers' default.
        guard EVP_CipherInit_ex2(ctx, algorithm.cipher, key, nil, 1, nil) == 1 else {
            EVP_CIPHER_CTX_free(ctx)
            OpenSSL.clearErrors()
            throw .library("EVP_CipherInit_ex2")
        }
        self.key = key
        self.ctx = ctx
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    func run(encrypt: Bool, input: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
             output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        if let failure = attempt(encrypt: encrypt, input: input, nonce: nonce, aad: aad, output: output, tag: tag) {
            throw failure
        }
    }

    /// Returns nil on success. Never throws so it can run inside `withUnsafeBytes` closures.
    func attempt(encrypt: Bool, input: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                 output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) -> CryptoError? {
        guard nonce.count == AEAD.nonceByteCount else {
            return .invalidNonceSize(expected: AEAD.nonceByteCount, actual: nonce.count)
        }
        // EVP_CipherUpdate takes an int length.
        guard input.count <= Int(Int32.max - 64), aad.count <= Int(Int32.max) else { return .sizeLimitExceeded }
        let failure = cipher(encrypt: encrypt, input: input, nonce: nonce, aad: aad, output: output, tag: tag)
        if failure != nil {
            OpenSSL.clearErrors()
            if !encrypt, output.count > 0 { output.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        return failure
    }

    private func cipher(encrypt: Bool, input: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                        output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) -> CryptoError? {
        guard EVP_CipherInit_ex2(ctx, nil, nil, nonce.nonNullBase, encrypt ? 1 : 0, nil) == 1 else {
            return .library("EVP_CipherInit_ex2(iv)")
        }
        var length: Int32 = 0
        if aad.count > 0 {
            guard EVP_CipherUpdate(ctx, nil, &length, aad.nonNullBase, Int32(aad.count)) == 1 else {
                return .library("EVP_CipherUpdate(aad)")
            }
        }
        let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var written = 0
        if input.count > 0 {
            guard EVP_CipherUpdate(ctx, out, &length, input.nonNullBase, Int32(input.count)) == 1 else {
                return .library("EVP_CipherUpdate")
            }
            written = Int(length)
        }
        if !encrypt {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(AEAD.tagByteCount), tag.baseAddress) == 1 else {
                return .library("EVP_CTRL_AEAD_SET_TAG")
            }
        }
        // Both ciphers are stream modes: Final writes nothing, but give it a valid pointer.
        let finalOut = out.map { $0 + written } ?? OpenSSL.zeroByte
        guard EVP_CipherFinal_ex(ctx, finalOut, &length) == 1 else {
            return encrypt ? .library("EVP_CipherFinal_ex") : .authenticationFailure
        }
        if encrypt {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(AEAD.tagByteCount), tag.baseAddress) == 1 else {
                return .library("EVP_CTRL_AEAD_GET_TAG")
            }
        }
        return nil
    }
}
