import COpenSSL
import Glibc

/// One X.509 certificate, parsed by OpenSSL.
public struct Certificate: Sendable, Hashable {
    let box: X509Box
    /// The exact DER bytes the certificate was parsed from.
    public let derRepresentation: [UInt8]

    /// Parses one DER certificate; trailing bytes are refused.
    public init(derRepresentation bytes: some BytesView) throws(CryptoError) {
        let der = bytes.byteArray
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else { return nil }
            guard cursor == buffer.baseAddress.map({ $0 + buffer.count }) else {
                X509_free(x509)
                return nil
            }
            return x509
        }
        guard let parsed else {
            OpenSSL.clearErrors()
            throw .malformedEncoding("X.509 DER")
        }
        box = X509Box(owning: parsed)
        derRepresentation = der
    }

    /// Parses every `BEGIN CERTIFICATE` block of a PEM text, in order. At least one is required.
    public static func chain(pemRepresentation pem: String) throws(CryptoError) -> [Certificate] {
        var ders: [[UInt8]] = []
        withMemoryBIO(Array(pem.utf8)) { bio in
            while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
                defer { X509_free(x509) }
                var out: UnsafeMutablePointer<UInt8>?
                let length = i2d_X509(x509, &out)
                if length > 0, let out {
                    ders.append(Array(UnsafeBufferPointer(start: out, count: Int(length))))
                    CRYPTO_free(out, #fileID, #line)
                }
            }
        }
        // The loop ends on "no start line" at the end of input; that is not an error.
        OpenSSL.clearErrors()
        guard !ders.isEmpty else { throw .malformedEncoding("no PEM certificate") }
        var chain: [Certificate] = []
        for der in ders { chain.append(try Certificate(derRepresentation: der)) }
        return chain
    }

    /// Parses a PEM text holding exactly one certificate.
    public init(pemRepresentation pem: String) throws(CryptoError) {
        let chain = try Certificate.chain(pemRepresentation: pem)
        guard chain.count == 1 else { throw .malformedEncoding("expected one PEM certificate, found \(chain.count)") }
        self = chain[0]
    }

    /// The DER contents of the extension `oid` (dotted form), i.e. the bytes inside its
    /// `extnValue` OCTET STRING; nil if absent. A certificate carrying the extension twice is
    /// malformed (RFC 5280 §4.2) and throws.
    public func extensionValue(oid: String) throws(CryptoError) -> [UInt8]? {
        guard let object = OBJ_txt2obj(oid, 1) else {
            OpenSSL.clearErrors()
            throw .invalidParameter("OID \(oid)")
        }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(box.x509, object, -1)
        guard index >= 0 else { return nil }
        guard X509_get_ext_by_OBJ(box.x509, object, index) < 0 else { throw .malformedEncoding("duplicate extension \(oid)") }
        guard let ext = X509_get_ext(box.x509, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        return asn1Bytes(data)
    }

    /// The DER SubjectPublicKeyInfo.
    public var subjectPublicKeyInfo: [UInt8] {
        guard let key = X509_get0_pubkey(box.x509) else { return [] }
        EVP_PKEY_up_ref(key)
        return PKey(owning: key).subjectPublicKeyInfo()
    }

    /// The subject public key as P-256, or nil if it is another kind of key.
    public var p256PublicKey: P256.PublicKey? {
        guard let key = X509_get0_pubkey(box.x509) else {
            OpenSSL.clearErrors()
            return nil
        }
        EVP_PKEY_up_ref(key)
        let pkey = PKey(owning: key)
        guard pkey.isP256 else { return nil }
        return P256.PublicKey(trusted: pkey)
    }

    /// True if this certificate's signature verifies under `issuer`'s public key (any key type
    /// OpenSSL knows: P-256, P-384, …). Only the signature: no name chaining, no extensions.
    public func isSigned(by issuer: Certificate) -> Bool {
        guard let key = X509_get0_pubkey(issuer.box.x509) else {
            OpenSSL.clearErrors()
            return false
        }
        let verified = withExtendedLifetime(issuer) { X509_verify(box.x509, key) }
        OpenSSL.clearErrors()
        return verified == 1
    }

    /// notBefore ≤ `unixTime` ≤ notAfter.
    public func isValid(atUnixTime unixTime: Int64) -> Bool { notBefore <= unixTime && unixTime <= notAfter }

    /// Validity bounds in seconds since 1970 (UTC).
    public var notBefore: Int64 { unixTime(X509_get0_notBefore(box.x509)) }
    public var notAfter: Int64 { unixTime(X509_get0_notAfter(box.x509)) }
    /// Whether its issuer is its own subject (a self-signed placeholder, a root).
    public var isSelfIssued: Bool { X509_NAME_cmp(X509_get_subject_name(box.x509), X509_get_issuer_name(box.x509)) == 0 }

    public static func == (a: Certificate, b: Certificate) -> Bool { a.derRepresentation == b.derRepresentation }
    public func hash(into hasher: inout Swift.Hasher) { hasher.combine(derRepresentation) }

    /// Verifies that `chain` (leaf first, then intermediates in any order) leads to
    /// `trustAnchor`, with every validity period checked at `unixTime` rather than the clock.
    /// Only the trust anchor is trusted; system roots are never consulted.
    public static func verify(chain: [Certificate], trustAnchor: Certificate, atUnixTime unixTime: Int64) throws(CryptoError) {
        guard let leaf = chain.first else { throw .certificateRejected("empty chain") }
        guard let store = X509_STORE_new() else { throw .library("X509_STORE_new") }
        defer { X509_STORE_free(store) }
        guard X509_STORE_add_cert(store, trustAnchor.box.x509) == 1 else {
            OpenSSL.clearErrors()
            throw .library("X509_STORE_add_cert")
        }
        guard let untrusted = tether_sk_X509_new_null() else { throw .library("sk_X509_new_null") }
        defer { tether_sk_X509_free(untrusted) }
        for certificate in chain.dropFirst() {
            guard tether_sk_X509_push(untrusted, certificate.box.x509) > 0 else { throw .library("sk_X509_push") }
        }
        guard let ctx = X509_STORE_CTX_new() else { throw .library("X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf.box.x509, untrusted) == 1 else {
            OpenSSL.clearErrors()
            throw .library("X509_STORE_CTX_init")
        }
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), time_t(unixTime))
        let verified = withExtendedLifetime(chain) { X509_verify_cert(ctx) }
        guard verified == 1 else {
            let code = X509_STORE_CTX_get_error(ctx)
            OpenSSL.clearErrors()
            throw .certificateRejected(String(cString: X509_verify_cert_error_string(Int(code))))
        }
    }
}

final class X509Box: @unchecked Sendable { // an immutable X509, which OpenSSL lets threads read at once
    let x509: OpaquePointer
    init(owning x509: OpaquePointer) { self.x509 = x509 }
    deinit { X509_free(x509) }
}

func asn1Bytes(_ string: UnsafePointer<ASN1_STRING>) -> [UInt8] {
    let length = Int(ASN1_STRING_length(string))
    guard length > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: length))
}

private func unixTime(_ time: UnsafePointer<ASN1_TIME>?) -> Int64 {
    var parts = tm()
    guard let time, ASN1_TIME_to_tm(time, &parts) == 1 else { return 0 }
    return Int64(timegm(&parts))
}
