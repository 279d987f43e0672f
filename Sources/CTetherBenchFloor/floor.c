#include "CTetherBenchFloor.h"
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int seal_once(EVP_CIPHER_CTX *ctx, const unsigned char *iv, const unsigned char *aad, size_t aad_len,
                     unsigned char *buf, size_t len, unsigned char *tag) {
    int outl = 0, finl = 0;
    if (EVP_CipherInit_ex2(ctx, NULL, NULL, iv, 1, NULL) != 1) return 0;
    if (aad_len > 0 && EVP_CipherUpdate(ctx, NULL, &outl, aad, (int)aad_len) != 1) return 0;
    if (EVP_CipherUpdate(ctx, buf, &outl, buf, (int)len) != 1) return 0;
    if (EVP_CipherFinal_ex(ctx, buf + outl, &finl) != 1) return 0;
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) == 1;
}

double tether_bench_aead_floor_ns(const char *cipher_name, size_t payload, size_t aad_len, double seconds) {
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, cipher_name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    unsigned char key[32], iv[12], tag[16];
    unsigned char *aad = calloc(aad_len + 1, 1), *buf = calloc(payload + 1, 1);
    double result = -1;
    memset(key, 3, sizeof key);
    memset(iv, 1, sizeof iv);
    if (!cipher || !ctx || !aad || !buf || EVP_CipherInit_ex2(ctx, cipher, key, NULL, 1, NULL) != 1) goto done;
    for (int i = 0; i < 100; i++) seal_once(ctx, iv, aad, aad_len, buf, payload, tag);
    long iterations = 0, batch = 64;
    double start = now_ns(), elapsed = 0;
    while (elapsed < seconds * 1e9) {
        for (long i = 0; i < batch; i++) {
            if (!seal_once(ctx, iv, aad, aad_len, buf, payload, tag)) goto done;
        }
        iterations += batch;
        elapsed = now_ns() - start;
    }
    result = elapsed / (double)iterations;
done:
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(cipher);
    free(aad);
    free(buf);
    return result;
}
