import COpenSSL

/// ECDSA over NIST P-256 with SHA-256 (ES256 in JWT, App Attest assertions, APNs tokens).
public enum P256 {
    /// Bytes of an uncompressed SEC1 point: 0x04 ‖ x ‖ y.
    public static let x963ByteCount = 65
    /// Bytes of a raw r ‖ s signature (JWS/P1363 form).
    public static let rawSignatureByteCount = 64

    public struct PrivateKey: Sendable {
        let key: PKey
        public let publicKey: PublicKey

        /// A fresh random key.
        public init() {
            let group = ParamKey.group
            let curve: StaticString = "P-256"
            let params = [
                OSSL_PARAM_construct_utf8_string(cString(group), cStringMutable(curve), curve.utf8CodeUnitCount),
                OSSL_PARAM_construct_end(),
            ]
            key = params.withUnsafeBufferPointer { PKey.generate("EC", params: $0.baseAddress) }
            publicKey = PublicKey(trusted: key)
        }

        /// A key from a PEM file: PKCS#8 (`BEGIN PRIVATE KEY`, an APNs `.p8`) or SEC1
        /// (`BEGIN EC PRIVATE KEY`). Anything but a P-256 key is refused.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let loaded: OpaquePointer? = withMemoryBIO(Array(pem.utf8)) { bio in PEM_read_bio_PrivateKey(bio, nil, nil, nil) }
            guard let loaded else {
                OpenSSL.clearErrors()
                throw .malformedEncoding("PEM private key")
            }
            let key = PKey(owning: loaded)
            guard key.isP256 else { throw .invalidPrivateKey }
            self.key = key
            publicKey = PublicKey(trusted: key)
        }

        /// A key from its 32-byte big-endian scalar (a JWK's `d`).
        public init(rawRepresentation bytes: some BytesView) throws(CryptoError) {
            let scalar = bytes.byteArray
            guard scalar.count == 32 else { throw .invalidKeySize(expected: 32, actual: scalar.count) }
            guard let point = P256.publicPoint(forScalar: scalar) else { throw .invalidPrivateKey }
            guard let key = P256.importKey(publicPoint: point, privateScalar: scalar) else { throw .invalidPrivateKey }
            self.key = key
            publicKey = PublicKey(trusted: key)
        }

        /// PKCS#8 PEM, the format of an APNs `.p8` file.
        public var pemRepresentation: String {
            guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new failed") }
            defer { BIO_free(bio) }
            guard PEM_write_bio_PrivateKey(bio, key.pkey, nil, nil, 0, nil, nil) == 1 else { fatalError("PEM_write_bio_PrivateKey failed") }
            return String(decoding: memoryBIOContents(bio), as: UTF8.self)
        }

        /// A DER ECDSA-SHA256 signature of `message` (randomised, as ECDSA is).
        public func signature(for message: some BytesView) throws(CryptoError) -> Signature {
            var der = [UInt8](repeating: 0, count: 80)
            var length = der.count
            let status = message.withUnsafeBytes { message -> Int32 in
                guard let ctx = EVP_MD_CTX_new() else { return 0 }
                defer { EVP_MD_CTX_free(ctx) }
                guard EVP_DigestSignInit_ex(ctx, nil, cString("SHA2-256"), nil, nil, key.pkey, nil) == 1 else { return 0 }
                return der.withUnsafeMutableBufferPointer {
                    EVP_DigestSign(ctx, $0.baseAddress, &length, message.nonNullBase, message.count)
                }
            }
            try check(status, "EVP_DigestSign(ECDSA)")
            return try Signature(derRepresentation: der[..<length])
        }
    }

    public struct PublicKey: Sendable, Hashable {
        let key: PKey
        /// The uncompressed SEC1 point 0x04 ‖ x ‖ y (65 bytes).
        public let x963Representation: [UInt8]

        /// A key from an uncompressed SEC1 point. Points not on the curve are refused.
        public init(x963Representation bytes: some BytesView) throws(CryptoError) {
            let point = bytes.byteArray
            guard point.count == x963ByteCount, point[0] == 0x04 else { throw .invalidPublicKey }
            guard let key = P256.importKey(publicPoint: point, privateScalar: nil) else { throw .invalidPublicKey }
            self.key = key
            x963Representation = point
        }

        /// A key from a DER SubjectPublicKeyInfo.
        public init(derRepresentation bytes: some BytesView) throws(CryptoError) {
            let der = bytes.byteArray
            let loaded: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                let key = d2i_PUBKEY(nil, &cursor, buffer.count)
                // Trailing bytes after the structure make the encoding ambiguous.
                if let key, cursor != buffer.baseAddress.map({ $0 + buffer.count }) {
                    EVP_PKEY_free(key)
                    return nil
                }
                return key
            }
            guard let loaded else {
                OpenSSL.clearErrors()
                throw .malformedEncoding("SubjectPublicKeyInfo")
            }
            let key = PKey(owning: loaded)
            guard key.isP256 else { throw .invalidPublicKey }
            self.init(trusted: key)
        }

        init(trusted key: PKey) {
            self.key = key
            x963Representation = key.encodedPublicKey()
        }

        /// DER SubjectPublicKeyInfo.
        public var derRepresentation: [UInt8] { key.subjectPublicKeyInfo() }

        /// True only if `signature` verifies over SHA-256(`message`).
        public func isValidSignature(_ signature: Signature, for message: some BytesView) -> Bool {
            signature.derRepresentation.withUnsafeBytes { der in
                message.withUnsafeBytes { message in
                    guard let ctx = EVP_MD_CTX_new() else { return false }
                    defer { EVP_MD_CTX_free(ctx) }
                    guard EVP_DigestVerifyInit_ex(ctx, nil, cString("SHA2-256"), nil, nil, key.pkey, nil) == 1 else {
                        OpenSSL.clearErrors()
                        return false
                    }
                    let status = EVP_DigestVerify(ctx, der.nonNullBase, der.count, message.nonNullBase, message.count)
                    if status != 1 { OpenSSL.clearErrors() }
                    return status == 1
                }
            }
        }

        /// Verifies a DER signature; a malformed (non-DER) encoding never verifies.
        public func isValidSignature(derRepresentation signature: some BytesView, for message: some BytesView) -> Bool {
            guard let parsed = try? Signature(derRepresentation: signature) else { return false }
            return isValidSignature(parsed, for: message)
        }

        /// Verifies a raw r ‖ s signature; anything but 64 bytes never verifies.
        public func isValidSignature(rawRepresentation signature: some BytesView, for message: some BytesView) -> Bool {
            guard let parsed = try? Signature(rawRepresentation: signature) else { return false }
            return isValidSignature(parsed, for: message)
        }

        public static func == (a: PublicKey, b: PublicKey) -> Bool { a.x963Representation == b.x963Representation }
        public func hash(into hasher: inout Swift.Hasher) { hasher.combine(x963Representation) }
    }

    /// An ECDSA signature, convertible between DER and raw r ‖ s.
    public struct Signature: Sendable, Hashable {
        /// Strict DER: the encoding OpenSSL re-derives must equal the input byte for byte.
        public let derRepresentation: [UInt8]
        /// r ‖ s, each 32 bytes big-endian.
        public let rawRepresentation: [UInt8]

        public init(derRepresentation bytes: some BytesView) throws(CryptoError) {
            let der = bytes.byteArray
            guard let raw = P256.rawSignature(fromDER: der) else { throw .invalidSignatureEncoding }
            derRepresentation = der
            rawRepresentation = raw
        }

        public init(rawRepresentation bytes: some BytesView) throws(CryptoError) {
            let raw = bytes.byteArray
            guard raw.count == rawSignatureByteCount, let der = P256.derSignature(fromRaw: raw) else {
                throw .invalidSignatureEncoding
            }
            rawRepresentation = raw
            derRepresentation = der
        }
    }
}

// MARK: - OpenSSL plumbing

extension P256 {
    /// Parses a DER ECDSA-Sig-Value and returns r ‖ s, or nil if the encoding is not strict
    /// DER, has trailing bytes, or a component does not fit 32 bytes.
    static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
                OpenSSL.clearErrors()
                return nil
            }
            defer { ECDSA_SIG_free(sig) }
            guard cursor == buffer.baseAddress.map({ $0 + buffer.count }) else { return nil }
            // Re-encode: BER leniencies (long-form lengths, padding) produce different bytes.
            var reencoded: UnsafeMutablePointer<UInt8>?
            let length = i2d_ECDSA_SIG(sig, &reencoded)
            guard length > 0, let reencoded else { return nil }
            defer { CRYPTO_free(reencoded, #fileID, #line) }
            guard Int(length) == buffer.count, CRYPTO_memcmp(reencoded, buffer.baseAddress!, buffer.count) == 0 else { return nil }
            var r: OpaquePointer?
            var s: OpaquePointer?
            ECDSA_SIG_get0(sig, &r, &s)
            guard let r, let s, BN_is_negative(r) == 0, BN_is_negative(s) == 0 else { return nil }
            var raw = [UInt8](repeating: 0, count: rawSignatureByteCount)
            let ok = raw.withUnsafeMutableBufferPointer { out in
                BN_bn2binpad(r, out.baseAddress, 32) == 32 && BN_bn2binpad(s, out.baseAddress! + 32, 32) == 32
            }
            return ok ? raw : nil
        }
    }

    /// DER-encodes r ‖ s.
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let (r, s) = raw.withUnsafeBufferPointer { b in
            (BN_bin2bn(b.baseAddress!, 32, nil), BN_bin2bn(b.baseAddress! + 32, 32, nil))
        }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(sig, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The uncompressed public point d·G for a private scalar (nil for 0 or d ≥ n).
    static func publicPoint(forScalar scalar: [UInt8]) -> [UInt8]? {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { return nil }
        defer { EC_GROUP_free(group) }
        guard let d = BN_bin2bn(scalar, 32, nil) else { return nil }
        defer { BN_clear_free(d) }
        guard BN_is_zero(d) == 0, BN_cmp(d, EC_GROUP_get0_order(group)) < 0 else { return nil }
        guard let point = EC_POINT_new(group) else { return nil }
        defer { EC_POINT_free(point) }
        guard EC_POINT_mul(group, point, d, nil, nil, nil) == 1 else {
            OpenSSL.clearErrors()
            return nil
        }
        var out = [UInt8](repeating: 0, count: x963ByteCount)
        let written = EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &out, out.count, nil)
        return written == x963ByteCount ? out : nil
    }

    /// Builds an EC key from its public point and, optionally, its private scalar.
    /// OpenSSL checks that the point lies on the curve.
    static func importKey(publicPoint: [UInt8], privateScalar: [UInt8]?) -> PKey? {
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        var privateBN: OpaquePointer?
        defer { BN_clear_free(privateBN) }
        let curve: StaticString = "P-256"
        guard OSSL_PARAM_BLD_push_utf8_string(builder, cString(ParamKey.group), cString(curve), 0) == 1 else { return nil }
        let pushed = publicPoint.withUnsafeBytes {
            OSSL_PARAM_BLD_push_octet_string(builder, cString(ParamKey.publicKey), $0.baseAddress, $0.count)
        }
        guard pushed == 1 else { return nil }
        if let privateScalar {
            privateBN = BN_bin2bn(privateScalar, Int32(privateScalar.count), nil)
            guard let privateBN, OSSL_PARAM_BLD_push_BN(builder, cString("priv"), privateBN) == 1 else { return nil }
        }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, cString("EC"), nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        let selection = privateScalar == nil ? tether_EVP_PKEY_PUBLIC_KEY() : tether_EVP_PKEY_KEYPAIR()
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1, let pkey else {
            OpenSSL.clearErrors()
            return nil
        }
        let key = PKey(owning: pkey)
        // fromdata trusts its input; a full public-key check rejects off-curve and infinity points.
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(check) }
        guard EVP_PKEY_public_check(check) == 1 else {
            OpenSSL.clearErrors()
            return nil
        }
        if privateScalar != nil {
            guard EVP_PKEY_pairwise_check(check) == 1 else {
                OpenSSL.clearErrors()
                return nil
            }
        }
        return key
    }
}

extension PKey {
    var isP256: Bool {
        guard EVP_PKEY_is_a(pkey, cString("EC")) == 1 else { return false }
        var name = [CChar](repeating: 0, count: 32)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pkey, cString(ParamKey.group), &name, name.count, &length) == 1 else {
            OpenSSL.clearErrors()
            return false
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }

    /// The uncompressed encoded public point of an EC key.
    func encodedPublicKey() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 133)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, cString("encoded-pub-key"), &out, out.count, &length) == 1 else {
            fatalError("EVP_PKEY_get_octet_string_param(encoded-pub-key) failed")
        }
        return Array(out.prefix(length))
    }

    /// DER SubjectPublicKeyInfo.
    func subjectPublicKeyInfo() -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(pkey, &out)
        guard length > 0, let out else { fatalError("i2d_PUBKEY failed") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}

/// Runs `body` with a read-only memory BIO over `bytes`.
func withMemoryBIO<R>(_ bytes: [UInt8], _ body: (OpaquePointer) -> R) -> R {
    bytes.withUnsafeBytes { raw in
        guard let bio = tether_BIO_new_mem_buf(raw.nonNullBase, Int32(raw.count)) else { fatalError("BIO_new_mem_buf failed") }
        defer { BIO_free(bio) }
        return body(bio)
    }
}

/// Everything written to a memory BIO.
func memoryBIOContents(_ bio: OpaquePointer) -> [UInt8] {
    var pointer: UnsafeMutablePointer<CChar>?
    let length = tether_BIO_get_mem_data(bio, &pointer)
    guard length > 0, let pointer else { return [] }
    return pointer.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
}
