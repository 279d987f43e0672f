import COpenSSL
import Glibc

/// A PKCS #10 certificate signing request for DNS names, as an ACME `finalize` sends it
/// (RFC 8555 §7.4): the names in a subjectAltName extension request, signed ECDSA-SHA256 by the
/// certificate's own key. OpenSSL does the encoding and the signing.
public enum CertificateSigningRequest {
    public static func der(dnsNames: [String], key: P256.PrivateKey) throws(CryptoError) -> [UInt8] {
        guard !dnsNames.isEmpty, let request = X509_REQ_new() else { throw .malformedEncoding("X509_REQ_new") }
        defer { X509_REQ_free(request) }
        var ok = X509_REQ_set_version(request, 0) == 1
        ok = ok && X509_REQ_set_pubkey(request, key.key.pkey) == 1
        if ok, let name = X509_NAME_new() {
            defer { X509_NAME_free(name) }
            let common = Array(dnsNames[0].utf8)
            ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, common, Int32(common.count), -1, 0) == 1
                && X509_REQ_set_subject_name(request, name) == 1
        } else {
            ok = false
        }
        if ok {
            let value = dnsNames.map { "DNS:" + $0 }.joined(separator: ",")
            if let extensions = OPENSSL_sk_new_null(), let altNames = X509V3_EXT_conf_nid(nil, nil, NID_subject_alt_name, value) {
                ok = OPENSSL_sk_push(extensions, UnsafeRawPointer(altNames)) > 0
                    && X509_REQ_add_extensions(request, extensions) == 1
                X509_EXTENSION_free(altNames)
                OPENSSL_sk_free(extensions)
            } else {
                ok = false
            }
        }
        ok = ok && X509_REQ_sign(request, key.key.pkey, EVP_sha256()) > 0
        guard ok else {
            OpenSSL.clearErrors()
            throw .malformedEncoding("certificate signing request")
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_REQ(request, &out)
        guard length > 0, let out else { throw .malformedEncoding("certificate signing request encoding") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
