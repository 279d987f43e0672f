import COpenSSL
import Glibc

extension Certificate {
    /// One extension of an issued certificate: its OID (dotted), the DER inside `extnValue`,
    /// and whether it is critical.
    public struct Extension: Sendable {
        public let oid: String
        public let der: [UInt8]
        public let critical: Bool

        public init(oid: String, der: [UInt8], critical: Bool = false) {
            self.oid = oid
            self.der = der
            self.critical = critical
        }

        /// basicConstraints `cA TRUE` (critical), for an issuing certificate.
        public static let certificateAuthority = Extension(oid: "2.5.29.19", der: [0x30, 0x03, 0x01, 0x01, 0xFF], critical: true)
    }

    /// Issues an X.509 v3 certificate for `subjectKey`, signed ECDSA-SHA256 by `issuerKey`, with
    /// common names only and a random 64-bit serial. For test authorities (the software App
    /// Attest attester, test TLS); OpenSSL does all the encoding and signing.
    public static func issue(subject: String, subjectKey: P256.PublicKey, issuer: String, issuerKey: P256.PrivateKey,
                             notBefore: Int64, notAfter: Int64, extensions: [Extension] = []) throws(CryptoError) -> Certificate {
        guard let x509 = X509_new() else { throw .malformedEncoding("X509_new") }
        defer { X509_free(x509) }
        var ok = X509_set_version(x509, 2) == 1
        ok = ok && ASN1_INTEGER_set_uint64(X509_get_serialNumber(x509), UInt64.random(in: 1...UInt64(Int64.max))) == 1
        ok = ok && ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore)) != nil
        ok = ok && ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter)) != nil
        ok = ok && setName(subject) { X509_set_subject_name(x509, $0) }
        ok = ok && setName(issuer) { X509_set_issuer_name(x509, $0) }
        ok = ok && X509_set_pubkey(x509, subjectKey.key.pkey) == 1
        for ext in extensions where ok {
            ok = add(ext, to: x509)
        }
        ok = ok && X509_sign(x509, issuerKey.key.pkey, EVP_sha256()) > 0
        guard ok else {
            OpenSSL.clearErrors()
            throw .malformedEncoding("certificate issuance")
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else { throw .malformedEncoding("certificate encoding") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return try Certificate(derRepresentation: Array(UnsafeBufferPointer(start: out, count: Int(length))))
    }

    /// The certificate as one PEM block.
    public var pemRepresentation: String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, box.x509) == 1 else { fatalError("PEM_write_bio_X509 failed") }
        return String(decoding: memoryBIOContents(bio), as: UTF8.self)
    }

    private static func setName(_ commonName: String, _ apply: (OpaquePointer) -> Int32) -> Bool {
        guard let name = X509_NAME_new() else { return false }
        defer { X509_NAME_free(name) }
        let bytes = Array(commonName.utf8)
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1 else { return false }
        return apply(name) == 1
    }

    private static func add(_ ext: Extension, to x509: OpaquePointer) -> Bool {
        guard let object = OBJ_txt2obj(ext.oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        guard let value = ASN1_OCTET_STRING_new() else { return false }
        defer { ASN1_OCTET_STRING_free(value) }
        guard ASN1_OCTET_STRING_set(value, ext.der, Int32(ext.der.count)) == 1,
              let made = X509_EXTENSION_create_by_OBJ(nil, object, ext.critical ? 1 : 0, value) else { return false }
        defer { X509_EXTENSION_free(made) }
        return X509_add_ext(x509, made, -1) == 1
    }
}
