import COpenSSL

/// Algorithm objects fetched once from the default provider.
///
/// Explicit fetches are cached because an implicit fetch (passing `EVP_sha256()` and friends)
/// takes a provider lock and a cache lookup on every init, which dominates small messages.
/// Fetched objects are immutable and safe to share across threads.
enum OpenSSL {
    nonisolated(unsafe) static let sha1 = fetchDigest("SHA1")
    nonisolated(unsafe) static let sha256 = fetchDigest("SHA2-256")
    nonisolated(unsafe) static let sha512 = fetchDigest("SHA2-512")
    nonisolated(unsafe) static let blake2s256 = fetchDigest("BLAKE2S-256")
    nonisolated(unsafe) static let blake2b512 = fetchDigest("BLAKE2B-512")

    nonisolated(unsafe) static let chacha20Poly1305 = fetchCipher("ChaCha20-Poly1305")
    nonisolated(unsafe) static let aes256GCM = fetchCipher("AES-256-GCM")
    nonisolated(unsafe) static let chacha20 = fetchCipher("ChaCha20")

    nonisolated(unsafe) static let hmac = fetchMAC("HMAC")
    nonisolated(unsafe) static let blake2sMAC = fetchMAC("BLAKE2SMAC")
    nonisolated(unsafe) static let poly1305 = fetchMAC("POLY1305")

    nonisolated(unsafe) static let hkdf = fetchKDF("HKDF")

    /// One zero byte, for calls that reject a NULL pointer even with length 0.
    nonisolated(unsafe) static let zeroByte: UnsafeMutablePointer<UInt8> = {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        p.initialize(to: 0)
        return p
    }()

    private static func fetchDigest(_ name: String) -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, name, nil) else { unavailable(name) }
        return md
    }

    private static func fetchCipher(_ name: String) -> OpaquePointer {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else { unavailable(name) }
        return cipher
    }

    private static func fetchMAC(_ name: String) -> OpaquePointer {
        guard let mac = EVP_MAC_fetch(nil, name, nil) else { unavailable(name) }
        return mac
    }

    private static func fetchKDF(_ name: String) -> OpaquePointer {
        guard let kdf = EVP_KDF_fetch(nil, name, nil) else { unavailable(name) }
        return kdf
    }

    /// A missing algorithm means a broken OpenSSL installation; nothing can be served safely.
    private static func unavailable(_ name: String) -> Never {
        fatalError("OpenSSL 3 default provider lacks \(name); install Debian's libssl3")
    }

    /// Clears OpenSSL's thread-local error queue after an expected failure, so a stale entry
    /// cannot be misattributed to a later call.
    static func clearErrors() { ERR_clear_error() }
}

/// Checks an OpenSSL status (1 = success) and names the call on failure.
@inline(__always)
func check(_ status: Int32, _ call: StaticString) throws(CryptoError) {
    guard status == 1 else {
        OpenSSL.clearErrors()
        throw .library("\(call)")
    }
}

/// OSSL_PARAM keys. OSSL_PARAM stores the key pointer, so keys must have static storage:
/// a Swift `String` bridged for one call would dangle.
enum ParamKey {
    static let digest: StaticString = "digest"
    static let size: StaticString = "size"
    static let key: StaticString = "key"
    static let salt: StaticString = "salt"
    static let info: StaticString = "info"
    static let mode: StaticString = "mode"
    static let group: StaticString = "group"
    static let publicKey: StaticString = "pub"
    static let ivLength: StaticString = "ivlen"
}

/// The NUL-terminated bytes of a static string literal, as OpenSSL wants them.
@inline(__always)
func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// The same, for parameters OpenSSL declares non-const but never writes through.
@inline(__always)
func cStringMutable(_ s: StaticString) -> UnsafeMutablePointer<CChar> {
    UnsafeMutablePointer(mutating: cString(s))
}
