#ifndef TETHER_COPENSSL_SHIM_H
#define TETHER_COPENSSL_SHIM_H
// OpenSSL 3 (Debian libssl-dev). Only non-deprecated interfaces are used.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
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
#endif
