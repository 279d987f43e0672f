#ifndef TETHER_BENCH_FLOOR_H
#define TETHER_BENCH_FLOOR_H
#include <stddef.h>
/// Nanoseconds per AEAD seal done directly in C with OpenSSL's EVP calls, per message exactly
/// what TetherCrypto's AEAD does (set IV, AAD, payload, final, read tag). It is the floor a
/// wrapper can reach; `openssl speed` measures less for ChaCha20-Poly1305 (no per-message IV).
/// Returns a negative value if the cipher is unavailable.
double tether_bench_aead_floor_ns(const char *cipher, size_t payload, size_t aad, double seconds);
#endif
