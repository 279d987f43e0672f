import COpenSSL

/// An incremental hash. A value type: copying one forks its state.
public struct IncrementalHash: @unchecked Sendable { // the EVP_MD context is copied before any mutation when shared, as Array does
    public let function: HashFunction
    private var context: DigestContext

    public init(_ function: HashFunction) {
        self.function = function
        context = DigestContext(function.md)
    }

    public mutating func update(_ data: some BytesView) {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        data.withUnsafeBytes { raw in
            guard EVP_DigestUpdate(context.ctx, raw.nonNullBase, raw.count) == 1 else {
                fatalError("EVP_DigestUpdate failed")
            }
        }
    }

    /// The digest of everything fed so far. The hasher itself is left unchanged.
    public func finalize() -> [UInt8] {
        let scratch = context.copy()
        return [UInt8](unsafeUninitializedCapacity: function.byteCount) { out, count in
            var length: UInt32 = 0
            guard EVP_DigestFinal_ex(scratch.ctx, out.baseAddress, &length) == 1 else {
                fatalError("EVP_DigestFinal_ex failed")
            }
            count = Int(length)
        }
    }
}

final class DigestContext {
    let ctx: OpaquePointer

    init(_ md: OpaquePointer) {
        guard let ctx = EVP_MD_CTX_new(), EVP_DigestInit_ex2(ctx, md, nil) == 1 else {
            fatalError("EVP_DigestInit_ex2 failed")
        }
        self.ctx = ctx
    }

    private init(owning ctx: OpaquePointer) { self.ctx = ctx }

    func copy() -> DigestContext {
        guard let dup = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(dup, ctx) == 1 else {
            fatalError("EVP_MD_CTX_copy_ex failed")
        }
        return DigestContext(owning: dup)
    }

    deinit { EVP_MD_CTX_free(ctx) }
}
