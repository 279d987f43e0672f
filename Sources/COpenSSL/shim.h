#ifndef TETHER_COPENSSL_SHIM_H
#define TETHER_COPENSSL_SHIM_H
// OpenSSL 3 (Debian libssl-dev). Only non-deprecated interfaces are used.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/objects.h>
#include <openssl/params.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

// Function-like macros do not import into Swift; these wrap the ones Tether needs.
static inline int tether_EVP_PKEY_CTX_set_ec_paramgen_curve_nid(EVP_PKEY_CTX *ctx, int nid) {
    return EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, nid);
}
static inline BIO *tether_BIO_new_mem_buf(const void *buf, int len) { return BIO_new_mem_buf(buf, len); }
static inline long tether_BIO_get_mem_data(BIO *bio, char **pp) { return BIO_get_mem_data(bio, pp); }
static inline int tether_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline STACK_OF(X509) *tether_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline void tether_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline int tether_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int tether_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline int tether_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }
static inline long tether_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) { return SSL_CTX_set_min_proto_version(ctx, version); }
static inline long tether_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long tether_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline const char *tether_SSL_get_servername(const SSL *ssl) { return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name); }
static inline int tether_TLS1_2_VERSION(void) { return TLS1_2_VERSION; }
static inline long tether_SSL_MODE_RELEASE_BUFFERS(void) { return SSL_MODE_RELEASE_BUFFERS; }
static inline long tether_SSL_MODE_ENABLE_PARTIAL_WRITE(void) { return SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; }

/// ALPN selection for servers that speak only HTTP/1.1: pick "http/1.1" if offered, else
/// no ALPN (the client then assumes HTTP/1.1 anyway).
static inline int tether_alpn_select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                            const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    static const unsigned char http11[] = "\x08http/1.1";
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, http11, sizeof(http11) - 1, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}
static inline void tether_SSL_CTX_select_http11(SSL_CTX *ctx) { SSL_CTX_set_alpn_select_cb(ctx, tether_alpn_select_http11, NULL); }

/// ACME TLS-ALPN-01 (RFC 8737): the ALPN of a ClientHello, and whether it offers "acme-tls/1".
static inline int tether_client_hello_offers_acme_tls(SSL *ssl) {
    const unsigned char *data = NULL;
    size_t length = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &data, &length) != 1 || length < 2) return 0;
    size_t list = ((size_t)data[0] << 8) | data[1];
    if (list + 2 != length) return 0;
    for (size_t at = 2; at < length;) {
        size_t name = data[at];
        if (at + 1 + name > length) return 0;
        if (name == 10 && memcmp(data + at + 1, "acme-tls/1", 10) == 0) return 1;
        at += 1 + name;
    }
    return 0;
}
/// The host_name of a ClientHello's server_name extension, copied NUL-terminated into `out`
/// (lowercase is the caller's); 0 when absent, malformed or longer than `capacity - 1`.
static inline int tether_client_hello_server_name(SSL *ssl, char *out, size_t capacity) {
    const unsigned char *data = NULL;
    size_t length = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &data, &length) != 1 || length < 5) return 0;
    size_t list = ((size_t)data[0] << 8) | data[1];
    if (list + 2 != length || data[2] != TLSEXT_NAMETYPE_host_name) return 0;
    size_t name = ((size_t)data[3] << 8) | data[4];
    if (5 + name > length || name == 0 || name >= capacity) return 0;
    memcpy(out, data + 5, name);
    out[name] = 0;
    return 1;
}
/// ALPN for a server that answers TLS-ALPN-01: "acme-tls/1" when offered (the client-hello
/// callback has installed the challenge certificate, or failed the handshake), else http/1.1.
static inline int tether_alpn_select_acme_or_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                                     const unsigned char *in, unsigned int inlen, void *arg) {
    static const unsigned char acme[] = "\x0a" "acme-tls/1";
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, acme, sizeof(acme) - 1, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
    }
    return tether_alpn_select_http11(ssl, out, outlen, in, inlen, arg);
}
static inline void tether_SSL_CTX_select_acme_or_http11(SSL_CTX *ctx) { SSL_CTX_set_alpn_select_cb(ctx, tether_alpn_select_acme_or_http11, NULL); }
static inline int tether_SSL_CLIENT_HELLO_SUCCESS(void) { return SSL_CLIENT_HELLO_SUCCESS; }
static inline int tether_SSL_CLIENT_HELLO_ERROR(void) { return SSL_CLIENT_HELLO_ERROR; }
static inline int tether_SSL_AD_NO_APPLICATION_PROTOCOL(void) { return SSL_AD_NO_APPLICATION_PROTOCOL; }

// DTLS (TetherRTC's DTLSTransport).
static inline long tether_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) { return SSL_CTX_set_max_proto_version(ctx, version); }
static inline long tether_SSL_CTX_disable_session_cache(SSL_CTX *ctx) { return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); }
static inline uint64_t tether_SSL_OP_NO_QUERY_MTU(void) { return SSL_OP_NO_QUERY_MTU; }
static inline uint64_t tether_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline uint64_t tether_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline long tether_DTLS_set_link_mtu(SSL *ssl, long mtu) { return DTLS_set_link_mtu(ssl, mtu); }
static inline long tether_DTLSv1_get_timeout(SSL *ssl, struct timeval *remaining) { return DTLSv1_get_timeout(ssl, remaining); }
static inline long tether_DTLSv1_handle_timeout(SSL *ssl) { return DTLSv1_handle_timeout(ssl); }
#endif
