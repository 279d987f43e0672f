// What OpenSSL itself holds for an idle server-side TLS connection, without Tether: the RSS a
// process gains per connection after N TLS handshakes over socketpairs, the server's SSL objects
// kept alive and idle (as a parked relay connection is), measured after malloc_trim.
//
//   cc -O2 -o openssl-idle-cost openssl-idle-cost.c -lssl -lcrypto
//   ./openssl-idle-cost CERT.pem KEY.pem [N]        (default N 2000)
//
// The server context is configured as Tether's (TLS 1.2 minimum, SSL_MODE_RELEASE_BUFFERS, the
// same certificate); the client is OpenSSL's default (TLS 1.3) in a child process, so only the
// server's side is in the measured process. Prints one line per variant: socket BIO; socket
// BIO after SSL_free_buffers; Tether's shape (a memory BIO in, the socket out). Options that
// might shrink the idle state, set in the environment: NO_TICKETS=1, NO_CACHE=1, TLS12=1,
// CHACHA=1 (measured with OpenSSL 3.0.19: none takes it below ~13 KB).
#include <malloc.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static void die(const char *what) {
  fprintf(stderr, "openssl-idle-cost: %s\n", what);
  ERR_print_errors_fp(stderr);
  exit(1);
}

// One variant: N handshakes; returns RSS bytes per connection held by the idle server objects.
static double run(const char *cert, const char *key, int n, int free_buffers, int mem_bio) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) die("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) die("certificate");
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) die("key");
  if (getenv("NO_TICKETS")) SSL_CTX_set_num_tickets(ctx, 0);
  if (getenv("NO_CACHE")) SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (getenv("TLS12")) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  if (getenv("CHACHA")) SSL_CTX_set_ciphersuites(ctx, "TLS_CHACHA20_POLY1305_SHA256");

  int (*pairs)[2] = calloc(n, sizeof *pairs);
  for (int i = 0; i < n; i++)
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[i]) != 0) die("socketpair (raise ulimit -n)");
  pid_t child = fork();
  if (child == 0) {
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    for (int i = 0; i < n; i++) {
      close(pairs[i][0]);
      SSL *c = SSL_new(cctx);
      SSL_set_fd(c, pairs[i][1]);
      if (SSL_connect(c) != 1) die("client handshake");
      // A byte each way after the handshake, as a parked mac's upgrade and hello are.
      char byte = 'x';
      SSL_write(c, &byte, 1);
      SSL_read(c, &byte, 1);
    }
    char wait;
    if (read(STDIN_FILENO, &wait, 1) < 0) {}
    _exit(0);
  }
  for (int i = 0; i < n; i++) close(pairs[i][1]);

  SSL **ssl = calloc(n, sizeof *ssl);
  malloc_trim(0);
  long before = rss_kb();
  for (int i = 0; i < n; i++) {
    ssl[i] = SSL_new(ctx);
    if (mem_bio) {
      // Tether's shape: a memory BIO the loop feeds, and the socket for output.
      BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new_socket(pairs[i][0], BIO_NOCLOSE);
      SSL_set_bio(ssl[i], in, out);
      char buffer[4096];
      for (;;) {
        int r = SSL_accept(ssl[i]);
        if (r == 1) break;
        if (SSL_get_error(ssl[i], r) != SSL_ERROR_WANT_READ) die("server handshake");
        ssize_t got = read(pairs[i][0], buffer, sizeof buffer);
        if (got <= 0) die("read");
        BIO_write(in, buffer, (int)got);
      }
      char byte;
      for (;;) {
        int r = SSL_read(ssl[i], &byte, 1);
        if (r == 1) break;
        if (SSL_get_error(ssl[i], r) != SSL_ERROR_WANT_READ) die("server read");
        ssize_t got = read(pairs[i][0], buffer, sizeof buffer);
        if (got <= 0) die("read");
        BIO_write(in, buffer, (int)got);
      }
      SSL_write(ssl[i], &byte, 1);
    } else {
      SSL_set_fd(ssl[i], pairs[i][0]);
      if (SSL_accept(ssl[i]) != 1) die("server handshake");
      char byte;
      if (SSL_read(ssl[i], &byte, 1) != 1) die("server read");
      SSL_write(ssl[i], &byte, 1);
    }
    if (free_buffers) SSL_free_buffers(ssl[i]);
  }
  malloc_trim(0);
  long after = rss_kb();
  double per = (after - before) * 1024.0 / n;
  printf("openssl %s idle server TLS connection (%s, %s%s): %.0f B RSS each over %d\n", OpenSSL_version(OPENSSL_VERSION),
         SSL_get_version(ssl[0]), mem_bio ? "memory BIO in, socket out" : "socket BIO",
         free_buffers ? ", SSL_free_buffers" : "", per, n);
  fflush(stdout);
  for (int i = 0; i < n; i++) { SSL_free(ssl[i]); close(pairs[i][0]); }
  kill(child, SIGTERM);
  waitpid(child, NULL, 0);
  free(ssl);
  free(pairs);
  SSL_CTX_free(ctx);
  return per;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: openssl-idle-cost CERT.pem KEY.pem [N]\n"); return 2; }
  int n = argc > 3 ? atoi(argv[3]) : 2000;
  run(argv[1], argv[2], n, 0, 0);
  run(argv[1], argv[2], n, 1, 0);
  run(argv[1], argv[2], n, 0, 1);
  return 0;
}
