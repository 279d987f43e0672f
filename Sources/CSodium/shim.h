// libsodium (Debian: libsodium-dev): Ed25519 verification only. Its 64-bit field arithmetic
// verifies about twice as fast as OpenSSL 3.0's, and the signaling server verifies every
// `register` and every `signal` (signaling.md §6.1 step 4, §6.2 step 2).
#include <sodium.h>
