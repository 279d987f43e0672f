import COpenSSL

/// Owns one EVP_PKEY. Keys are never mutated after construction, and OpenSSL allows
/// concurrent read-only use of a key, so a box can be shared freely.
final class PKey: @unchecked Sendable { // an immutable EVP_PKEY, which OpenSSL lets threads read at once
    let pkey: OpaquePointer

    init(owning pkey: OpaquePointer) { self.pkey = pkey }

    deinit { EVP_PKEY_free(pkey) }

    static func rawPrivate(_ type: StaticString, _ bytes: UnsafeRawBufferPointer) -> PKey? {
        guard let pkey = EVP_PKEY_new_raw_private_key_ex(nil, cString(type), nil, bytes.nonNullBase, bytes.count) else {
            OpenSSL.clearErrors()
            return nil
        }
        return PKey(owning: pkey)
    }

    static func rawPublic(_ type: StaticString, _ bytes: UnsafeRawBufferPointer) -> PKey? {
        guard let pkey = EVP_PKEY_new_raw_public_key_ex(nil, cString(type), nil, bytes.nonNullBase, bytes.count) else {
            OpenSSL.clearErrors()
            return nil
        }
        return PKey(owning: pkey)
    }

    /// A fresh key of `type`, with `params` (e.g. the EC group) applied before generation.
    static func generate(_ type: StaticString, params: UnsafePointer<OSSL_PARAM>? = nil) -> PKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, cString(type), nil) else { fatalError("EVP_PKEY_CTX_new_from_name(\(type)) failed") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1,
              params == nil || EVP_PKEY_CTX_set_params(ctx, params) == 1,
              EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else {
            fatalError("EVP_PKEY_generate(\(type)) failed")
        }
        return PKey(owning: pkey)
    }

    func rawPublicBytes(count: Int) -> [UInt8] {
        var length = count
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { out, written in
            guard EVP_PKEY_get_raw_public_key(pkey, out.baseAddress, &length) == 1, length == count else {
                fatalError("EVP_PKEY_get_raw_public_key failed")
            }
            written = length
        }
        return bytes
    }

    func rawPrivateBytes(count: Int) -> [UInt8] {
        var length = count
        return [UInt8](unsafeUninitializedCapacity: count) { out, written in
            guard EVP_PKEY_get_raw_private_key(pkey, out.baseAddress, &length) == 1, length == count else {
                fatalError("EVP_PKEY_get_raw_private_key failed")
            }
            written = length
        }
    }
}
