import COpenSSL

/// HKDF (RFC 5869) over any `HashFunction`, computed by OpenSSL's EVP_KDF.
///
/// An absent or empty salt is the RFC's "string of HashLen zeros": HMAC pads a key with
/// zeros to a block, so the empty key and HashLen zeros give the same PRK.
/// With `.blake2s` and an empty `info`, this is Noise's HKDF (salt = chaining key).
public enum HKDF {
    /// Extract-then-expand. `outputByteCount` must be 1...255 × HashLen.
    public static func deriveKey(_ function: HashFunction = .sha256,
                                 inputKeyMaterial ikm: some BytesView,
                                 salt: some BytesView = [UInt8](),
                                 info: some BytesView = [UInt8](),
                                 outputByteCount: Int) throws(CryptoError) -> [UInt8] {
        guard outputByteCount > 0, outputByteCount <= 255 * function.byteCount else {
            throw .invalidParameter("HKDF output length \(outputByteCount) outside 1...\(255 * function.byteCount)")
        }
        var output = [UInt8](repeating: 0, count: outputByteCount)
        let ok = ikm.withUnsafeBytes { ikm in
            salt.withUnsafeBytes { salt in
                info.withUnsafeBytes { info in
                    output.withUnsafeMutableBytes { out in
                        derive(function, ikm: ikm, salt: salt, info: info, into: out)
                    }
                }
            }
        }
        guard ok else { throw .library("EVP_KDF_derive(HKDF)") }
        return output
    }

    /// Derives into `out` (its whole length). Returns false only if OpenSSL fails.
    static func derive(_ function: HashFunction, ikm: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer,
                       info: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard let ctx = EVP_KDF_CTX_new(OpenSSL.hkdf) else { return false }
        defer { EVP_KDF_CTX_free(ctx) }
        let name = function.openSSLName
        // OpenSSL treats a zero-length key as "no key set"; the RFC allows an empty IKM.
        // HMAC with an empty message is what extract computes then, and OpenSSL's HKDF
        // accepts a one-byte buffer with length 0, so point at a valid byte.
        var params: [OSSL_PARAM] = [
            OSSL_PARAM_construct_utf8_string(cString(ParamKey.digest), cStringMutable(name), name.utf8CodeUnitCount),
            OSSL_PARAM_construct_octet_string(cString(ParamKey.key), UnsafeMutableRawPointer(mutating: ikm.nonNullBase), ikm.count),
        ]
        if salt.count > 0 {
            params.append(OSSL_PARAM_construct_octet_string(cString(ParamKey.salt), UnsafeMutableRawPointer(mutating: salt.nonNullBase), salt.count))
        }
        if info.count > 0 {
            params.append(OSSL_PARAM_construct_octet_string(cString(ParamKey.info), UnsafeMutableRawPointer(mutating: info.nonNullBase), info.count))
        }
        params.append(OSSL_PARAM_construct_end())
        let status = params.withUnsafeBufferPointer { p in
            EVP_KDF_derive(ctx, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, p.baseAddress)
        }
        if status != 1 { OpenSSL.clearErrors() }
        return status == 1
    }
}
