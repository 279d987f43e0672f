import COpenSSL

extension Ed25519 {
    /// True when `encoding` decodes to a point of the curve as RFC 8032 §5.1.3 decodes it: 32
    /// bytes, canonical (y < p, no negative zero), and x² = (y² − 1) / (d·y² + 1) has a square
    /// root mod p. About half of all 32-byte strings fail the last step.
    ///
    /// `PublicKey(rawRepresentation:)` cannot answer this: OpenSSL imports any 32 bytes as an
    /// Ed25519 key and only finds out at verification, yet an ID must be refused before it is
    /// selected (signaling.md §3.1), not by a signature that never comes.
    public static func isValidPublicKeyEncoding(_ encoding: some BytesView) -> Bool {
        encoding.withUnsafeBytes { raw -> Bool in
            guard raw.count == keyByteCount, isCanonicalPointEncoding(raw) else { return false }
            // y is the low 255 bits, little-endian; BIGNUM reads big-endian.
            var yBytes = [UInt8](raw.reversed())
            yBytes[0] &= 0x7f
            return hasXCoordinate(yBigEndian: yBytes) ?? false
        }
    }

    /// d = −121665 / 121666 mod p (RFC 8032 §5.1), big-endian.
    private static let curveD: [UInt8] = [
        0x52, 0x03, 0x6c, 0xee, 0x2b, 0x6f, 0xfe, 0x73, 0x8c, 0xc7, 0x40, 0x79, 0x77, 0x79, 0xe8, 0x98,
        0x00, 0x70, 0x0a, 0x4d, 0x41, 0x41, 0xd8, 0xab, 0x75, 0xeb, 0x4d, 0xca, 0x13, 0x59, 0x78, 0xa3,
    ]

    /// Whether u/v is a square mod p (Euler's criterion), for u = y² − 1 and v = d·y² + 1; nil
    /// if OpenSSL could not compute it (allocation failure), which callers treat as "no".
    private static func hasXCoordinate(yBigEndian: [UInt8]) -> Bool? {
        guard let context = BN_CTX_new() else { return nil }
        defer { BN_CTX_free(context) }
        BN_CTX_start(context)
        defer { BN_CTX_end(context) }
        guard let p = BN_CTX_get(context), let d = BN_CTX_get(context), let y = BN_CTX_get(context),
              let one = BN_CTX_get(context), let ySquared = BN_CTX_get(context), let u = BN_CTX_get(context),
              let v = BN_CTX_get(context), let inverse = BN_CTX_get(context), let ratio = BN_CTX_get(context),
              let exponent = BN_CTX_get(context), let symbol = BN_CTX_get(context) else { return nil }
        // p = 2^255 − 19, and (p − 1) / 2 for Euler's criterion.
        guard BN_set_word(p, 0) == 1, BN_set_bit(p, 255) == 1, BN_sub_word(p, 19) == 1,
              BN_copy(exponent, p) != nil, BN_sub_word(exponent, 1) == 1, BN_rshift1(exponent, exponent) == 1,
              BN_bin2bn(curveD, Int32(curveD.count), d) != nil,
              BN_bin2bn(yBigEndian, Int32(yBigEndian.count), y) != nil,
              BN_set_word(one, 1) == 1,
              BN_mod_sqr(ySquared, y, p, context) == 1,
              BN_mod_sub(u, ySquared, one, p, context) == 1,
              BN_mod_mul(v, d, ySquared, p, context) == 1,
              BN_mod_add(v, v, one, p, context) == 1 else { return nil }
        // y = ±1: x = 0, a point (its sign bit was checked with the encoding).
        if BN_is_zero(u) == 1 { return true }
        // d is not a square mod p, so v is never zero and always invertible.
        guard BN_mod_inverse(inverse, v, p, context) != nil,
              BN_mod_mul(ratio, u, inverse, p, context) == 1,
              BN_mod_exp(symbol, ratio, exponent, p, context) == 1 else { return nil }
        return BN_is_one(symbol) == 1
    }
}
