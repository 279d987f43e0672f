import COpenSSL

/// HMAC (RFC 2104) over any `HashFunction`, computed by OpenSSL's EVP_MAC.
///
/// With `.blake2s` this is the HMAC-BLAKE2s that Noise's HKDF uses (64-byte block).
public struct HMAC: @unchecked Sendable { // the EVP_MAC context is copied before any mutation when shared, as Array does
    public let function: HashFunction
    private var context: MACContext

    /// Starts a MAC under `key` (any length; longer than a block is hashed, as RFC 2104 says).
    public init(_ function: HashFunction, key: some BytesView) {
        self.function = function
        context = key.withUnsafeBytes { MACContext.hmac(function, key: $0) }
    }

    public mutating func update(_ data: some BytesView) {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        context.update(data)
    }

    /// The MAC of everything fed so far. The state itself is left unchanged.
    public func finalize() -> [UInt8] { context.copy().finalize(count: function.byteCount) }

    /// The MAC of `data` under `key`.
    public static func authenticationCode(_ function: HashFunction, key: some BytesView, data: some BytesView) -> [UInt8] {
        let context = key.withUnsafeBytes { MACContext.hmac(function, key: $0) }
        context.update(data)
        return context.finalize(count: function.byteCount)
    }

    /// The MAC of the concatenation of `parts` under `key`.
    public static func authenticationCode(_ function: HashFunction, key: some BytesView, parts: [any BytesView]) -> [UInt8] {
        let context = key.withUnsafeBytes { MACContext.hmac(function, key: $0) }
        for part in parts { context.update(part) }
        return context.finalize(count: function.byteCount)
    }

    /// Checks `code` against the MAC of `data` in constant time. A `code` shorter than the
    /// full MAC is compared against the MAC's leading bytes (RFC 4231 §4.6 truncation); an
    /// empty or over-long code never verifies.
    public static func isValidAuthenticationCode(_ code: some BytesView, _ function: HashFunction,
                                                 key: some BytesView, data: some BytesView) -> Bool {
        let full = authenticationCode(function, key: key, data: data)
        return code.withUnsafeBytes { raw in
            guard raw.count > 0, raw.count <= full.count else { return false }
            return full.withUnsafeBytes { constantTimeEquals(raw, UnsafeRawBufferPointer(rebasing: $0[..<raw.count])) }
        }
    }
}

/// One EVP_MAC_CTX. Owned by exactly one value at a time (callers copy before mutating a shared one).
final class MACContext {
    let ctx: OpaquePointer

    private init(owning ctx: OpaquePointer) { self.ctx = ctx }

    static func hmac(_ function: HashFunction, key: UnsafeRawBufferPointer) -> MACContext {
        guard let ctx = EVP_MAC_CTX_new(OpenSSL.hmac) else { fatalError("EVP_MAC_CTX_new failed") }
        let status = withDigestParameter(function) { params in
            EVP_MAC_init(ctx, key.nonNullBase, key.count, params)
        }
        guard status == 1 else { fatalError("EVP_MAC_init(HMAC) failed") }
        return MACContext(owning: ctx)
    }

    /// A keyed MAC of another kind (BLAKE2SMAC, POLY1305). Returns nil when OpenSSL refuses the
    /// key or parameters, so the caller can report its own specific error.
    static func keyed(_ mac: OpaquePointer, key: UnsafeRawBufferPointer,
                      params: UnsafePointer<OSSL_PARAM>?) -> MACContext? {
        guard let ctx = EVP_MAC_CTX_new(mac) else { fatalError("EVP_MAC_CTX_new failed") }
        guard EVP_MAC_init(ctx, key.nonNullBase, key.count, params) == 1 else {
            EVP_MAC_CTX_free(ctx)
            OpenSSL.clearErrors()
            return nil
        }
        return MACContext(owning: ctx)
    }

    func update(_ data: some BytesView) {
        data.withUnsafeBytes { raw in
            guard EVP_MAC_update(ctx, raw.nonNullBase, raw.count) == 1 else { fatalError("EVP_MAC_update failed") }
        }
    }

    func finalize(count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { out, written in
            var length = 0
            guard EVP_MAC_final(ctx, out.baseAddress, &length, count) == 1 else { fatalError("EVP_MAC_final failed") }
            written = length
        }
    }

    func copy() -> MACContext {
        guard let dup = EVP_MAC_CTX_dup(ctx) else { fatalError("EVP_MAC_CTX_dup failed") }
        return MACContext(owning: dup)
    }

    deinit { EVP_MAC_CTX_free(ctx) }
}

/// Runs `body` with an OSSL_PARAM list naming `function` as the digest.
func withDigestParameter<R>(_ function: HashFunction, _ body: (UnsafePointer<OSSL_PARAM>) -> R) -> R {
    let name = function.openSSLName
    var params = [
        OSSL_PARAM_construct_utf8_string(cString(ParamKey.digest), cStringMutable(name), name.utf8CodeUnitCount),
        OSSL_PARAM_construct_end(),
    ]
    return params.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}
