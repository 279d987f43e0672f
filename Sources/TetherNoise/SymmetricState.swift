import TetherCrypto

/// Noise's SymmetricState (§5.2): the chaining key, the handshake hash and a CipherState.
struct SymmetricState: Sendable {
    let hash: HashFunction
    private(set) var chainingKey: [UInt8]
    private(set) var h: [UInt8]
    private(set) var cipherState: CipherState

    /// InitializeSymmetric: h = the name padded with zeros if it fits HASHLEN, else HASH(name).
    init(protocol noise: NoiseProtocol) {
        hash = noise.hash.function
        let name = Array(noise.name.utf8)
        if name.count <= hash.byteCount {
            h = name + [UInt8](repeating: 0, count: hash.byteCount - name.count)
        } else {
            h = hash.hash(name)
        }
        chainingKey = h
        cipherState = CipherState(cipher: noise.cipher)
    }

    /// Noise's HKDF with 2 or 3 outputs: RFC 5869 with salt = ck and an empty info.
    private func hkdf(_ ikm: [UInt8], outputs: Int) -> [[UInt8]] {
        // HKDF cannot fail for 2 or 3 hash-length outputs.
        let okm = try! HKDF.deriveKey(hash, inputKeyMaterial: ikm, salt: chainingKey, outputByteCount: outputs * hash.byteCount)
        return (0..<outputs).map { Array(okm[($0 * hash.byteCount)..<(($0 + 1) * hash.byteCount)]) }
    }

    mutating func mixKey(_ ikm: [UInt8]) {
        let out = hkdf(ikm, outputs: 2)
        chainingKey = out[0]
        // With a 64-byte hash the cipher key is the first 32 bytes.
        cipherState.initializeKey(Array(out[1].prefix(32)))
    }

    mutating func mixHash(_ data: [UInt8]) {
        h = hash.hash(parts: [h, data])
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipherState.encrypt(plaintext, ad: h)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipherState.decrypt(ciphertext, ad: h)
        mixHash(ciphertext)
        return plaintext
    }

    var hasKey: Bool { cipherState.hasKey }

    /// Split: two CipherStates from HKDF(ck, empty).
    func split(cipher: NoiseProtocol.Cipher) -> (CipherState, CipherState) {
        let out = hkdf([], outputs: 2)
        return (CipherState(cipher: cipher, key: Array(out[0].prefix(32))), CipherState(cipher: cipher, key: Array(out[1].prefix(32))))
    }
}
