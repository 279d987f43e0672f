import COpenSSL

/// Compares two byte strings in time independent of their contents.
///
/// Lengths are treated as public: unequal lengths return false at once.
public func constantTimeEquals(_ a: some BytesView, _ b: some BytesView) -> Bool {
    a.withUnsafeBytes { a in
        b.withUnsafeBytes { b in constantTimeEquals(a, b) }
    }
}

func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    if a.count == 0 { return true }
    return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
}
