import COpenSSL

/// The hash functions Tether uses, each backed by OpenSSL.
public enum HashFunction: Sendable, Hashable, CaseIterable {
    /// SHA-1: only for HMAC-SHA1 (coturn's TURN REST credentials). Never as a bare hash.
    case sha1
    case sha256
    case sha512
    /// BLAKE2s with a 32-byte output, as Noise's `BLAKE2s` uses it.
    case blake2s
    /// BLAKE2b with a 64-byte output, as Noise's `BLAKE2b` uses it.
    case blake2b

    /// Output length in bytes.
    public var byteCount: Int {
        switch self {
        case .sha1: 20
        case .sha256, .blake2s: 32
        case .sha512, .blake2b: 64
        }
    }

    /// Internal block length in bytes (HMAC pads keys to it).
    public var blockByteCount: Int {
        switch self {
        case .sha1, .sha256, .blake2s: 64
        case .sha512, .blake2b: 128
        }
    }

    /// The OpenSSL name, as used in OSSL_PARAM digest settings.
    var openSSLName: StaticString {
        switch self {
        case .sha1: "SHA1"
        case .sha256: "SHA2-256"
        case .sha512: "SHA2-512"
        case .blake2s: "BLAKE2S-256"
        case .blake2b: "BLAKE2B-512"
        }
    }

    var md: OpaquePointer {
        switch self {
        case .sha1: OpenSSL.sha1
        case .sha256: OpenSSL.sha256
        case .sha512: OpenSSL.sha512
        case .blake2s: OpenSSL.blake2s256
        case .blake2b: OpenSSL.blake2b512
        }
    }

    /// Hashes `data` in one call.
    public func hash(_ data: some BytesView) -> [UInt8] {
        data.withUnsafeBytes { hash(raw: $0) }
    }

    /// Hashes the concatenation of `parts` without concatenating them.
    public func hash(parts: [any BytesView]) -> [UInt8] {
        var hasher = IncrementalHash(self)
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    func hash(raw data: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: byteCount) { out, count in
            var length: UInt32 = 0
            // EVP_Digest only fails on allocation failure or a broken provider.
            guard EVP_Digest(data.nonNullBase, data.count, out.baseAddress, &length, md, nil) == 1 else {
                fatalError("EVP_Digest failed for \(openSSLName)")
            }
            count = Int(length)
        }
    }
}

/// SHA-256 in one call.
public enum SHA256 {
    public static let byteCount = 32
    public static func hash(_ data: some BytesView) -> [UInt8] { HashFunction.sha256.hash(data) }
}

/// SHA-512 in one call.
public enum SHA512 {
    public static let byteCount = 64
    public static func hash(_ data: some BytesView) -> [UInt8] { HashFunction.sha512.hash(data) }
}
