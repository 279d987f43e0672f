import TetherCrypto

/// Noise's CipherState (§5.1): a key, a 64-bit nonce, and encryption with associated data.
///
/// Fails closed: once a decryption fails, the state is poisoned and every later call throws.
/// The nonce 2^64 − 1 is reserved, so reaching it is an error, never a wrap.
public struct CipherState: Sendable {
    public static let maxNonce = UInt64.max
    public static let tagByteCount = 16

    let cipher: NoiseProtocol.Cipher
    private var aead: AEAD?
    private var key: [UInt8]?
    public private(set) var nonce: UInt64 = 0
    public private(set) var isPoisoned = false

    init(cipher: NoiseProtocol.Cipher) { self.cipher = cipher }

    init(cipher: NoiseProtocol.Cipher, key: [UInt8]) {
        self.cipher = cipher
        initializeKey(key)
    }

    public var hasKey: Bool { key != nil }

    mutating func initializeKey(_ key: [UInt8]) {
        // A 32-byte key is always accepted by both ciphers.
        aead = try! AEAD(cipher.aead, key: key)
        self.key = key
        nonce = 0
    }

    /// Sets the nonce explicitly (§5.1 SetNonce), for protocols that carry it out of band.
    public mutating func setNonce(_ value: UInt64) { nonce = value }

    /// Encrypts into `output` (plaintext length + 16). Without a key, copies the plaintext.
    public mutating func encrypt(_ plaintext: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                                 into output: UnsafeMutableRawBufferPointer) throws(NoiseError) {
        guard !isPoisoned else { throw .poisoned }
        guard hasKey else {
            guard output.count == plaintext.count else { throw .messageTooLarge(output.count) }
            if plaintext.count > 0 { output.copyMemory(from: plaintext) }
            return
        }
        guard output.count == plaintext.count + Self.tagByteCount else { throw .messageTooLarge(output.count) }
        guard nonce != Self.maxNonce else { throw .nonceExhausted }
        var nonceBytes = Self.nonceBytes(nonce, cipher: cipher)
        do {
            try withUnsafeBytes(of: &nonceBytes) { n throws(CryptoError) in
                try aead!.seal(plaintext: plaintext, nonce: n, authenticating: ad,
                               ciphertext: UnsafeMutableRawBufferPointer(rebasing: output[..<plaintext.count]),
                               tag: UnsafeMutableRawBufferPointer(rebasing: output[plaintext.count...]))
            }
        } catch {
            isPoisoned = true
            throw .poisoned
        }
        nonce += 1
    }

    /// Decrypts into `output` (ciphertext length − 16). Any failure poisons the state and
    /// zeroes `output`. Without a key, copies the ciphertext.
    public mutating func decrypt(_ ciphertext: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                                 into output: UnsafeMutableRawBufferPointer) throws(NoiseError) {
        guard !isPoisoned else { throw .poisoned }
        guard hasKey else {
            guard output.count == ciphertext.count else { throw .messageTooLarge(output.count) }
            if ciphertext.count > 0 { output.copyMemory(from: ciphertext) }
            return
        }
        guard ciphertext.count >= Self.tagByteCount, output.count == ciphertext.count - Self.tagByteCount else {
            isPoisoned = true
            throw .authenticationFailure
        }
        guard nonce != Self.maxNonce else { throw .nonceExhausted }
        var nonceBytes = Self.nonceBytes(nonce, cipher: cipher)
        let body = output.count
        do {
            try withUnsafeBytes(of: &nonceBytes) { n throws(CryptoError) in
                try aead!.open(ciphertext: UnsafeRawBufferPointer(rebasing: ciphertext[..<body]),
                               tag: UnsafeRawBufferPointer(rebasing: ciphertext[body...]),
                               nonce: n, authenticating: ad, plaintext: output)
            }
        } catch {
            isPoisoned = true
            throw .authenticationFailure
        }
        nonce += 1
    }

    /// Array form of `encrypt`.
    public mutating func encrypt(_ plaintext: [UInt8], ad: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        try transform(plaintext, ad: ad, outputCount: plaintext.count + (hasKey ? Self.tagByteCount : 0)) {
            (state: inout CipherState, input, ad, output) throws(NoiseError) in try state.encrypt(input, ad: ad, into: output)
        }
    }

    /// Array form of `decrypt`.
    public mutating func decrypt(_ ciphertext: [UInt8], ad: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        guard !isPoisoned else { throw .poisoned }
        guard !hasKey || ciphertext.count >= Self.tagByteCount else {
            isPoisoned = true
            throw .authenticationFailure
        }
        return try transform(ciphertext, ad: ad, outputCount: ciphertext.count - (hasKey ? Self.tagByteCount : 0)) {
            (state: inout CipherState, input, ad, output) throws(NoiseError) in try state.decrypt(input, ad: ad, into: output)
        }
    }

    /// Runs a pointer-level operation into a fresh array of `outputCount` bytes.
    private mutating func transform(_ input: [UInt8], ad: [UInt8], outputCount: Int,
                                    _ operation: (inout CipherState, UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(NoiseError) -> Void) throws(NoiseError) -> [UInt8] {
        var failure: NoiseError?
        let output = [UInt8](unsafeUninitializedCapacity: outputCount) { buffer, written in
            failure = input.withUnsafeBytes { i in
                ad.withUnsafeBytes { a -> NoiseError? in
                    do throws(NoiseError) {
                        try operation(&self, i, a, UnsafeMutableRawBufferPointer(buffer))
                        return nil
                    } catch { return error }
                }
            }
            written = failure == nil ? outputCount : 0
        }
        if let failure { throw failure }
        return output
    }

    /// Rekey (§4.2, §11.3): k = the first 32 bytes of ENCRYPT(k, 2^64 − 1, empty, 32 zero bytes).
    /// The nonce is unchanged.
    public mutating func rekey() throws(NoiseError) {
        guard !isPoisoned else { throw .poisoned }
        guard hasKey else { throw .missingKey("cipher key") }
        var nonceBytes = Self.nonceBytes(Self.maxNonce, cipher: cipher)
        let zeros = [UInt8](repeating: 0, count: 32)
        let sealed: [UInt8]
        do {
            sealed = try withUnsafeBytes(of: &nonceBytes) { n throws(CryptoError) in try aead!.seal(zeros, nonce: n) }
        } catch {
            isPoisoned = true
            throw .poisoned
        }
        let kept = nonce
        initializeKey(Array(sealed.prefix(32)))
        nonce = kept
    }

    /// 4 zero bytes then the counter: little-endian for ChaChaPoly, big-endian for AESGCM.
    @inline(__always)
    static func nonceBytes(_ n: UInt64, cipher: NoiseProtocol.Cipher) -> (UInt32, UInt32, UInt32) {
        let value = cipher == .chaChaPoly ? n.littleEndian : n.bigEndian
        return withUnsafeBytes(of: value) { raw in
            (0, raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self), raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        }
    }
}

extension CipherState {
    /// A CipherState with a chosen key, for tests that check Rekey and nonce layout against the
    /// raw AEAD. Reachable only through `@_spi(NoiseTesting) import TetherNoise`.
    @_spi(NoiseTesting)
    public init(testingWithKey key: [UInt8], cipher: NoiseProtocol.Cipher) {
        self.init(cipher: cipher, key: key)
    }

    /// The raw key, so a protocol's published key vectors (signaling.md §12's epoch keys) can be
    /// checked. Reachable only through `@_spi(NoiseTesting) import TetherNoise`.
    @_spi(NoiseTesting)
    public var testingKey: [UInt8]? { key }
}
