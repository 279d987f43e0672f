// pushload — epoll load generator for a Profile M (Mytty) push relay, e.g. `tether push`.
//
// Implementation-neutral: it speaks only the wire protocol of push.md §2.2/§2.4 over plain
// HTTP/1.1 keep-alive connections to a loopback host:port.
//
//   Setup:  K x  POST /v1/register  {"deviceToken":"<64 hex>","environment":"production"}
//                -> 200 {"pushID":"…","relaySecret":"<base64 of 32 bytes>"}
//   Load:   POST /v1/push, round-robin over the K registrations, with
//             x-mytty-push-id, x-mytty-timestamp (unix seconds),
//             x-mytty-signature = lowercase hex HMAC-SHA256(secret, "<timestamp>.<body>")
//           body {"macID":"<UUID>","ciphertext":"<base64>","collapseID":"<UUID>","title":"Mytty",
//                 "placeholder":"Approval requested"}
//           Each registration has a fixed body; its signed request is rebuilt once per second
//           (the signature cache); --fresh-bodies signs a new body for every push instead.
//
// Modes (one JSON line of results on stdout at the end):
//   closed (default)  -c CONNS keep-alive connections, each with one request in flight;
//                     latency = response complete - request sent.
//   open (--rate R)   R pushes/s at fixed intended times spread over the -c connections; a push
//                     whose intended time comes while every connection is busy counts as `late`
//                     and is sent as soon as a connection frees up; latency is measured from the
//                     intended send time (no coordinated omission).
// Pushes and errors are counted by response-completion time inside the measured window
// [GO+warmup, GO+warmup+T). Any non-200 answer is an error, counted by status.
//
// Single process, single thread, one epoll loop. --pid samples the target's /proc/PID (RSS,
// CPU, threads, fds) at start, ready, window start/end, done and 1 s after, like wsload.
//
// Build: make pushload   (-lcrypto for HMAC-SHA256)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PUSHLOAD_VERSION "1"
#define MAX_RESP (1u << 20)
#define RCHUNK 16384

// ---------------------------------------------------------------- utilities

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline long wall_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long)ts.tv_sec;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pushload: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

static double cpu_self_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void rand_bytes(void *p, size_t n) {
  uint8_t *b = p;
  while (n) {
    ssize_t k = getrandom(b, n, 0);
    if (k < 0) { if (errno == EINTR) continue; die("getrandom: %s", strerror(errno)); }
    b += k; n -= (size_t)k;
  }
}

static const char HEXL[] = "0123456789abcdef";
static const char HEXU[] = "0123456789ABCDEF";

static void hex_lower(const uint8_t *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) { out[2 * i] = HEXL[in[i] >> 4]; out[2 * i + 1] = HEXL[in[i] & 15]; }
  out[2 * n] = 0;
}

// Foundation's UUID().uuidString form: uppercase, canonical, version 4.
static void uuid_upper(char out[37]) {
  uint8_t b[16];
  rand_bytes(b, 16);
  b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
  b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
  int o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = HEXU[b[i] >> 4];
    out[o++] = HEXU[b[i] & 15];
  }
  out[o] = 0;
}

static void b64enc(const uint8_t *in, size_t n, char *out) {
  static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = T[(v >> 18) & 63];
    out[o++] = T[(v >> 12) & 63];
    out[o++] = i + 1 < n ? T[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < n ? T[v & 63] : '=';
  }
  out[o] = 0;
}

// Standard base64 (with padding) -> bytes; returns length or -1.
static int b64dec(const char *in, size_t n, uint8_t *out, size_t cap) {
  if (n % 4) return -1;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int v[4], pad = 0;
    for (int j = 0; j < 4; j++) {
      char ch = in[i + j];
      if (ch >= 'A' && ch <= 'Z') v[j] = ch - 'A';
      else if (ch >= 'a' && ch <= 'z') v[j] = ch - 'a' + 26;
      else if (ch >= '0' && ch <= '9') v[j] = ch - '0' + 52;
      else if (ch == '+') v[j] = 62;
      else if (ch == '/') v[j] = 63;
      else if (ch == '=' && i + 4 == n && j >= 2) { v[j] = 0; pad++; }
      else return -1;
      if (pad && ch != '=') return -1;
    }
    uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    uint8_t t[3] = {(uint8_t)(x >> 16), (uint8_t)(x >> 8), (uint8_t)x};
    for (int j = 0; j < 3 - pad; j++) {
      if (o >= cap) return -1;
      out[o++] = t[j];
    }
  }
  return (int)o;
}

// lowercase hex HMAC-SHA256(key, "<ts>.<body>")
static void sign(const uint8_t key[32], const char *ts, size_t tslen, const char *body, size_t blen, char out[65]) {
  static uint8_t msg[8192];
  uint8_t mac[32];
  unsigned int ml = 0;
  if (tslen + 1 + blen > sizeof msg) die("body too long to sign");
  memcpy(msg, ts, tslen);
  msg[tslen] = '.';
  memcpy(msg + tslen + 1, body, blen);
  if (!HMAC(EVP_sha256(), key, 32, msg, tslen + 1 + blen, mac, &ml) || ml != 32) die("HMAC failed");
  hex_lower(mac, 32, out);
}

// ---------------------------------------------------------------- histogram (µs, as wsload)
#define HB 2048
typedef struct {
  uint64_t b[HB];
  uint64_t n, sum, min, max;
} hist_t;

static inline int hidx(uint64_t v) {
  if (v < 128) return (int)v;
  int msb = 63 - __builtin_clzll(v);
  int sh = msb - 6;
  int i = 128 + (sh - 1) * 64 + (int)((v >> sh) - 64);
  return i < HB ? i : HB - 1;
}
static uint64_t hval(int i) {
  if (i < 128) return (uint64_t)i;
  int sh = (i - 128) / 64 + 1;
  uint64_t sub = (uint64_t)((i - 128) % 64 + 64);
  return (sub << sh) + ((1ull << sh) >> 1);
}
static inline void hadd(hist_t *h, uint64_t v) {
  h->b[hidx(v)]++;
  if (h->n == 0 || v < h->min) h->min = v;
  if (v > h->max) h->max = v;
  h->n++;
  h->sum += v;
}
static uint64_t hpct(const hist_t *h, double p) {
  if (!h->n) return 0;
  uint64_t target = (uint64_t)ceil(p / 100.0 * (double)h->n);
  if (target < 1) target = 1;
  uint64_t c = 0;
  for (int i = 0; i < HB; i++) {
    c += h->b[i];
    if (c >= target) {
      uint64_t v = hval(i);
      if (v > h->max) v = h->max;
      if (v < h->min) v = h->min;
      return v;
    }
  }
  return h->max;
}

// ---------------------------------------------------------------- counters by key
#define NERR 32
typedef struct { char k[32]; uint64_t n; } errent_t;
typedef struct { errent_t e[NERR]; uint64_t other; } errmap_t;

static void err_add(errmap_t *m, const char *k) {
  for (int i = 0; i < NERR; i++) {
    if (m->e[i].k[0] == 0) {
      snprintf(m->e[i].k, sizeof m->e[i].k, "%s", k);
      m->e[i].n = 1;
      return;
    }
    if (!strncmp(m->e[i].k, k, sizeof m->e[i].k - 1)) { m->e[i].n++; return; }
  }
  m->other++;
}

static void jerrmap(FILE *o, const char *name, const errmap_t *m) {
  fprintf(o, ",\"%s\":{", name);
  int first = 1;
  for (int i = 0; i < NERR && m->e[i].k[0]; i++) {
    fprintf(o, "%s\"%s\":%llu", first ? "" : ",", m->e[i].k, (unsigned long long)m->e[i].n);
    first = 0;
  }
  if (m->other) fprintf(o, "%s\"other\":%llu", first ? "" : ",", (unsigned long long)m->other);
  fprintf(o, "}");
}

// ---------------------------------------------------------------- HTTP/1.1 response parser
// Parses one complete response from the start of buf. Returns the bytes it occupies (> 0),
// 0 when more bytes are needed, -1 on a malformed response. With eof set, a response without
// Content-Length and without chunked coding ends at the end of the buffer.
typedef struct {
  int status, close, interim;
  const uint8_t *body;
  size_t body_len;   // for chunked bodies: the first chunk only (enough for an error sample)
} resp_t;

static long parse_response(const uint8_t *buf, size_t len, int eof, resp_t *r) {
  memset(r, 0, sizeof *r);
  const uint8_t *end = memmem(buf, len, "\r\n\r\n", 4);
  if (!end) return len > 65536 ? -1 : 0;
  size_t hlen = (size_t)(end - buf) + 4;
  // status line: HTTP/1.x SSS reason
  if (hlen < 12 || memcmp(buf, "HTTP/1.", 7) || buf[8] != ' ') return -1;
  if (!isdigit(buf[9]) || !isdigit(buf[10]) || !isdigit(buf[11])) return -1;
  if (hlen > 12 + 4 && buf[12] != ' ' && buf[12] != '\r') return -1;
  r->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
  int http10 = buf[7] == '0';
  long clen = -1;
  int chunked = 0, keepalive = 0;
  const uint8_t *p = memchr(buf, '\n', hlen) + 1;
  while (p < end + 2) {
    const uint8_t *eol = memchr(p, '\n', (size_t)(end + 4 - p));
    if (!eol) return -1;
    size_t ll = (size_t)(eol - p);
    if (ll && p[ll - 1] == '\r') ll--;
    if (ll == 0) break;
    const uint8_t *colon = memchr(p, ':', ll);
    if (!colon) return -1;
    size_t nl = (size_t)(colon - p);
    const uint8_t *v = colon + 1, *ve = p + ll;
    while (v < ve && (*v == ' ' || *v == '\t')) v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    size_t vl = (size_t)(ve - v);
    if (nl == 14 && !strncasecmp((const char *)p, "content-length", 14)) {
      if (!vl) return -1;
      long x = 0;
      for (size_t i = 0; i < vl; i++) {
        if (!isdigit(v[i]) || x > (long)MAX_RESP) return -1;
        x = x * 10 + (v[i] - '0');
      }
      if (clen >= 0 && clen != x) return -1;
      clen = x;
    } else if (nl == 17 && !strncasecmp((const char *)p, "transfer-encoding", 17)) {
      if (vl >= 7 && !strncasecmp((const char *)ve - 7, "chunked", 7)) chunked = 1;
    } else if (nl == 10 && !strncasecmp((const char *)p, "connection", 10)) {
      for (size_t i = 0; i + 5 <= vl; i++) {
        if (!strncasecmp((const char *)v + i, "close", 5)) r->close = 1;
        if (i + 10 <= vl && !strncasecmp((const char *)v + i, "keep-alive", 10)) keepalive = 1;
      }
    }
    p = eol + 1;
  }
  if (http10 && !keepalive) r->close = 1;
  if (r->status >= 100 && r->status < 200) { r->interim = 1; return (long)hlen; }
  if (r->status == 204 || r->status == 304) return (long)hlen;
  if (chunked) {
    size_t off = hlen;
    int first = 1;
    for (;;) {
      const uint8_t *eol = memmem(buf + off, len - off, "\r\n", 2);
      if (!eol) return len - off > 1024 ? -1 : 0;
      size_t sz = 0, i = off;
      int nd = 0;
      for (; buf + i < eol && isxdigit(buf[i]); i++, nd++) {
        if (sz > MAX_RESP) return -1;
        sz = sz * 16 + (size_t)(isdigit(buf[i]) ? buf[i] - '0' : (tolower(buf[i]) - 'a' + 10));
      }
      if (!nd) return -1;
      size_t data = (size_t)(eol - buf) + 2;
      if (sz == 0) {
        // trailers until an empty line
        size_t q = data;
        for (;;) {
          const uint8_t *e2 = memmem(buf + q, len - q, "\r\n", 2);
          if (!e2) return 0;
          if (e2 == buf + q) return (long)(q + 2);
          q = (size_t)(e2 - buf) + 2;
        }
      }
      if (len < data + sz + 2) return 0;
      if (buf[data + sz] != '\r' || buf[data + sz + 1] != '\n') return -1;
      if (first) { r->body = buf + data; r->body_len = sz; first = 0; }
      off = data + sz + 2;
    }
  }
  if (clen >= 0) {
    if (len < hlen + (size_t)clen) return 0;
    r->body = buf + hlen;
    r->body_len = (size_t)clen;
    return (long)(hlen + (size_t)clen);
  }
  // no framing: body runs to EOF
  r->close = 1;
  if (!eof) return len > MAX_RESP ? -1 : 0;
  r->body = buf + hlen;
  r->body_len = len - hlen;
  return (long)len;
}

// Find "key":"value" in a flat JSON object (no escapes in value). Returns value length or -1.
static int json_str(const char *js, size_t n, const char *key, char *out, size_t cap) {
  char pat[64];
  int pl = snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = memmem(js, n, pat, (size_t)pl), *e = js + n;
  if (!p) return -1;
  p += pl;
  while (p < e && isspace((unsigned char)*p)) p++;
  if (p >= e || *p != ':') return -1;
  p++;
  while (p < e && isspace((unsigned char)*p)) p++;
  if (p >= e || *p != '"') return -1;
  p++;
  const char *q = p;
  while (q < e && *q != '"') { if (*q == '\\') return -1; q++; }
  if (q >= e || (size_t)(q - p) >= cap) return -1;
  memcpy(out, p, (size_t)(q - p));
  out[q - p] = 0;
  return (int)(q - p);
}

// ---------------------------------------------------------------- /proc sampling (as wsload)
typedef struct {
  int ok;
  long rss_kb, hwm_kb, threads, fds;
  double cpu_s;
} procsample_t;

static procsample_t sample_proc(pid_t pid) {
  procsample_t s = {0};
  if (pid <= 0) return s;
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return s;
  while (fgets(buf, sizeof buf, f)) {
    if (!strncmp(buf, "VmRSS:", 6)) s.rss_kb = atol(buf + 6);
    else if (!strncmp(buf, "VmHWM:", 6)) s.hwm_kb = atol(buf + 6);
    else if (!strncmp(buf, "Threads:", 8)) s.threads = atol(buf + 8);
  }
  fclose(f);
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  if (!f) return s;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *rp = strrchr(buf, ')');
  if (!rp) return s;
  unsigned long ut = 0, st = 0;
  if (sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2) {
    s.cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    s.ok = 1;
  }
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) if (de->d_name[0] != '.') s.fds++;
    closedir(d);
  }
  return s;
}

#define MAXCPU 64
typedef struct { int n; unsigned long long busy[MAXCPU + 1], total[MAXCPU + 1], steal[MAXCPU + 1]; } hoststat_t;
static hoststat_t sample_host(void) {
  hoststat_t h = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return h;
  char line[512];
  while (fgets(line, sizeof line, f) && !strncmp(line, "cpu", 3)) {
    int idx;
    char *p = line + 3;
    if (*p == ' ') idx = 0;
    else { idx = atoi(p) + 1; if (idx > MAXCPU) continue; }
    while (*p && *p != ' ') p++;
    unsigned long long v[10] = {0};
    sscanf(p, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    unsigned long long tot = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    h.total[idx] = tot;
    h.busy[idx] = tot - v[3] - v[4] - v[7];
    h.steal[idx] = v[7];
    if (idx > h.n) h.n = idx;
  }
  fclose(f);
  return h;
}

static void jhost(FILE *o, const hoststat_t *a, const hoststat_t *b) {
  if (!a->total[0] || b->total[0] <= a->total[0]) return;
  double dt = (double)(b->total[0] - a->total[0]);
  fprintf(o, ",\"host\":{\"steal_pct\":%.2f,\"busy_pct_per_cpu\":[", 100.0 * (double)(b->steal[0] - a->steal[0]) / dt);
  for (int i = 1; i <= b->n; i++) {
    double t = (double)(b->total[i] - a->total[i]);
    fprintf(o, "%s%.1f", i > 1 ? "," : "", t > 0 ? 100.0 * (double)(b->busy[i] - a->busy[i]) / t : 0.0);
  }
  fprintf(o, "]}");
}

// Foreign-load detector (as wsload): CPU time of every user process except the target and
// this program, summed over /proc at the window edges.
#define MAXPS 8192
typedef struct { int n; int pid[MAXPS]; unsigned long long t[MAXPS]; } pscan_t;
static pid_t g_target;
static void scan_procs(pscan_t *ps) {
  ps->n = 0;
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *de;
  pid_t self = getpid();
  while ((de = readdir(d)) && ps->n < MAXPS) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    int pid = atoi(de->d_name);
    if (pid == self || pid == g_target) continue;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    if (!rp) continue;
    unsigned long flags = 0, ut = 0, st = 0;
    long cut = 0, cst = 0;
    if (sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %lu %lu %ld %ld", &flags, &ut, &st, &cut, &cst) != 5) continue;
    if (flags & 0x00200000) continue;  // kernel threads
    ps->pid[ps->n] = pid;
    ps->t[ps->n] = ut + st + (unsigned long long)(cut > 0 ? cut : 0) + (unsigned long long)(cst > 0 ? cst : 0);
    ps->n++;
  }
  closedir(d);
}
static double foreign_cpu_s(const pscan_t *a, const pscan_t *b) {
  unsigned long long sum = 0;
  for (int i = 0; i < b->n; i++) {
    unsigned long long before = 0;
    for (int j = 0; j < a->n; j++) if (a->pid[j] == b->pid[i]) { before = a->t[j]; break; }
    if (b->t[i] > before) sum += b->t[i] - before;
  }
  return (double)sum / (double)sysconf(_SC_CLK_TCK);
}

static void jsample(FILE *o, const char *name, procsample_t s) {
  fprintf(o, ",\"%s\":{\"rss_kb\":%ld,\"hwm_kb\":%ld,\"cpu_s\":%.2f,\"threads\":%ld,\"fds\":%ld}", name, s.rss_kb, s.hwm_kb,
          s.cpu_s, s.threads, s.fds);
}

// ---------------------------------------------------------------- options
static struct {
  char target[128];
  struct sockaddr_in dst;
  int conns, regs;
  double rate, duration, warmup, timeout, setup_timeout, drain;
  int ct_bytes;
  int fresh;
  char env[16];
  pid_t pid;
  char label[128];
  int verbose;
} O;

// ---------------------------------------------------------------- state
typedef struct {
  char push_id[128];
  uint8_t secret[32];
  char token[65];
  char body[1024];
  size_t body_len;
  char *req;  // cached signed request, valid for req_ts
  size_t req_len;
  long req_ts;
} reg_t;

enum { C_DOWN, C_CONNECTING, C_IDLE, C_BUSY };
enum { K_REGISTER, K_PUSH };
enum { PH_SETUP, PH_RUN, PH_DRAIN, PH_DONE };

typedef struct conn {
  int fd, idx;
  uint8_t state, want_out, queued, kind;
  uint8_t *rb;
  size_t rlen, rcap;
  uint8_t *wb;
  size_t woff, wlen, wcap;
  uint64_t t_sent, t_intended, t_retry;
  int reg;
} conn;

static struct {
  int epfd, phase;
  conn *conns;
  reg_t *regs;
  int nregs_ok, next_reg_setup, rr;
  // idle FIFO
  conn **idle;
  int idle_h, idle_n;
  int busy;
  uint64_t t_go, t_meas0, t_meas1, t_drain_end, t_next_tick, t_next_scan, t_setup_deadline;
  int meas_started, meas_ended;
  // open loop
  uint64_t open_idx, late_upto;
  double iv_ns;
  // results (window)
  uint64_t pushes, sent, sent_total, late, errors;
  errmap_t by_status, by_kind;
  hist_t lat, reg_lat;
  char err_sample[256];
  double cpu_meas0, cpu_meas1;
  procsample_t s_m0, s_m1;
  hoststat_t h_m0, h_m1;
  pscan_t p_m0, p_m1;
  double foreign_s;
  // progress
  uint64_t v_ok, v_err, v_late, v_sent;
  hist_t v_lat;
  uint64_t fresh_ctr;
  long now_wall;
} S;

static void dispatch(uint64_t now);

static inline int in_window(uint64_t t) { return t >= S.t_meas0 && t < S.t_meas1; }

static void ep_set(conn *c, int out) {
  if (out == c->want_out) return;
  c->want_out = (uint8_t)out;
  struct epoll_event e = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(S.epfd, EPOLL_CTL_MOD, c->fd, &e);
}

static void idle_push(conn *c) {
  c->state = C_IDLE;
  if (c->queued) return;  // its earlier entry is still in the FIFO and now valid again
  S.idle[(S.idle_h + S.idle_n) % O.conns] = c;
  S.idle_n++;
  c->queued = 1;
}

static conn *idle_pop(void) {
  while (S.idle_n) {
    conn *c = S.idle[S.idle_h];
    S.idle_h = (S.idle_h + 1) % O.conns;
    S.idle_n--;
    c->queued = 0;
    if (c->state == C_IDLE) return c;  // stale entries (closed meanwhile) are skipped
  }
  return NULL;
}

static void count_error(uint64_t now, const char *kind, int status, const uint8_t *body, size_t blen) {
  if (S.phase == PH_SETUP) return;
  if (!in_window(now)) return;
  S.errors++;
  S.v_err++;
  if (status) {
    char k[16];
    snprintf(k, sizeof k, "%d", status);
    err_add(&S.by_status, k);
  } else {
    err_add(&S.by_kind, kind);
  }
  if (!S.err_sample[0]) {
    char b[200];  // JSON-escaped, printable ASCII only
    size_t n = 0;
    for (size_t i = 0; i < blen && i < 120 && n < sizeof b - 3; i++) {
      unsigned char ch = body[i];
      if (ch == '"' || ch == '\\') { b[n++] = '\\'; b[n++] = (char)ch; }
      else b[n++] = ch < 0x20 || ch > 0x7e ? '?' : (char)ch;
    }
    b[n] = 0;
    if (status) snprintf(S.err_sample, sizeof S.err_sample, "%d %s", status, b);
    else snprintf(S.err_sample, sizeof S.err_sample, "%s", kind);
  }
}

static void conn_connect(conn *c, uint64_t now);
static char g_last_connect_err[96] = "none";

static void conn_down(conn *c, uint64_t now, const char *why) {
  if (c->fd >= 0) {
    close(c->fd);  // also removes it from the epoll set
    c->fd = -1;
  }
  if (c->state == C_BUSY) {
    S.busy--;
    if (c->kind == K_REGISTER) {
      if (S.phase == PH_SETUP) die("register request failed: %s", why);
    } else {
      count_error(now, why, 0, NULL, 0);
    }
  }
  c->state = C_DOWN;
  c->rlen = c->woff = c->wlen = 0;
  c->want_out = 0;
  // reconnect (immediately after a clean close, after 100 ms after a failure)
  c->t_retry = now + (strcmp(why, "eof_idle") && strcmp(why, "conn_close") ? 100000000ull : 0);
  if (c->t_retry <= now && S.phase < PH_DRAIN) conn_connect(c, now);
}

static void conn_connect(conn *c, uint64_t now) {
  if (S.phase >= PH_DRAIN) return;
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) die("socket: %s", strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->state = C_CONNECTING;
  c->want_out = 1;
  struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
  epoll_ctl(S.epfd, EPOLL_CTL_ADD, c->fd, &e);
  int r = connect(c->fd, (struct sockaddr *)&O.dst, sizeof O.dst);
  if (r < 0 && errno != EINPROGRESS) {
    snprintf(g_last_connect_err, sizeof g_last_connect_err, "%s", strerror(errno));
    count_error(now, "connect", 0, NULL, 0);
    if (S.phase == PH_SETUP && now > S.t_setup_deadline) die("cannot connect to %s: %s", O.target, strerror(errno));
    conn_down(c, now, "connect");
  }
}

static void wput(conn *c, const void *d, size_t n) {
  if (c->wcap - c->wlen < n) {
    size_t nc = c->wcap ? c->wcap : 4096;
    while (nc - c->wlen < n) nc *= 2;
    c->wb = realloc(c->wb, nc);
    if (!c->wb) die("out of memory");
    c->wcap = nc;
  }
  memcpy(c->wb + c->wlen, d, n);
  c->wlen += n;
}

static void conn_flush(conn *c, uint64_t now) {
  while (c->woff < c->wlen) {
    ssize_t n = send(c->fd, c->wb + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
    if (n > 0) { c->woff += (size_t)n; continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) { ep_set(c, 1); return; }
    conn_down(c, now, "write");
    return;
  }
  c->woff = c->wlen = 0;
  ep_set(c, 0);
}

static char g_hosthdr[80];

static size_t build_push(char *out, size_t cap, const reg_t *r, const char *ts, size_t tslen, const char *body,
                         size_t blen) {
  char sig[65];
  sign(r->secret, ts, tslen, body, blen, sig);
  int n = snprintf(out, cap,
                   "POST /v1/push HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
                   "x-mytty-push-id: %s\r\nx-mytty-timestamp: %.*s\r\nx-mytty-signature: %s\r\n"
                   "content-length: %zu\r\n\r\n",
                   g_hosthdr, r->push_id, (int)tslen, ts, sig, blen);
  if (n < 0 || (size_t)n + blen > cap) die("request too long");
  memcpy(out + n, body, blen);
  return (size_t)n + blen;
}

static void send_push(conn *c, uint64_t intended, uint64_t now) {
  int ri = S.rr;
  S.rr = (S.rr + 1) % O.regs;
  reg_t *r = &S.regs[ri];
  char ts[24];
  int tl = snprintf(ts, sizeof ts, "%ld", S.now_wall);
  if (O.fresh) {
    // a new body (fresh collapseID) and signature for every push
    char body[1024], req[2048];
    size_t bl = r->body_len;
    memcpy(body, r->body, bl);
    char *cid = memmem(body, bl, "\"collapseID\":\"", 14);
    uint64_t k = ++S.fresh_ctr;
    for (int i = 0; i < 12; i++) cid[14 + 35 - i] = HEXU[(k >> (4 * i)) & 15];
    size_t n = build_push(req, sizeof req, r, ts, (size_t)tl, body, bl);
    wput(c, req, n);
  } else {
    if (r->req_ts != S.now_wall) {
      if (!r->req) r->req = malloc(2048);
      r->req_len = build_push(r->req, 2048, r, ts, (size_t)tl, r->body, r->body_len);
      r->req_ts = S.now_wall;
    }
    wput(c, r->req, r->req_len);
  }
  c->state = C_BUSY;
  c->kind = K_PUSH;
  c->reg = ri;
  c->t_sent = now;
  c->t_intended = intended;
  S.busy++;
  S.sent_total++;
  S.v_sent++;
  if (in_window(now)) S.sent++;
  conn_flush(c, now);
}

static void send_register(conn *c, uint64_t now) {
  int ri = S.next_reg_setup++;
  reg_t *r = &S.regs[ri];
  char body[160], req[512];
  int bl = snprintf(body, sizeof body, "{\"deviceToken\":\"%s\",\"environment\":\"%s\"}", r->token, O.env);
  int n = snprintf(req, sizeof req,
                   "POST /v1/register HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
                   "content-length: %d\r\n\r\n%s",
                   g_hosthdr, bl, body);
  wput(c, req, (size_t)n);
  c->state = C_BUSY;
  c->kind = K_REGISTER;
  c->reg = ri;
  c->t_sent = c->t_intended = now;
  S.busy++;
  conn_flush(c, now);
}

static void on_register_done(conn *c, const resp_t *r, uint64_t now) {
  reg_t *g = &S.regs[c->reg];
  if (r->status != 200) {
    die("register failed: HTTP %d %.*s", r->status, (int)(r->body_len > 200 ? 200 : r->body_len),
        r->body ? (const char *)r->body : "");
  }
  char secret[128];
  if (json_str((const char *)r->body, r->body_len, "pushID", g->push_id, sizeof g->push_id) <= 0)
    die("register: no pushID in %.*s", (int)r->body_len, r->body);
  for (const char *p = g->push_id; *p; p++)
    if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) die("register: unusable pushID");
  int sl = json_str((const char *)r->body, r->body_len, "relaySecret", secret, sizeof secret);
  if (sl <= 0 || b64dec(secret, (size_t)sl, g->secret, sizeof g->secret) != 32)
    die("register: relaySecret is not base64 of 32 bytes: %.*s", (int)r->body_len, r->body);
  hadd(&S.reg_lat, (now - c->t_sent) / 1000);
  S.nregs_ok++;
}

static void on_response(conn *c, const resp_t *r, uint64_t now) {
  c->state = C_IDLE;
  S.busy--;
  if (c->kind == K_REGISTER) {
    on_register_done(c, r, now);
    return;
  }
  uint64_t lat = (now - c->t_intended) / 1000;
  if (r->status == 200) {
    S.v_ok++;
    hadd(&S.v_lat, lat);
    if (in_window(now)) {
      S.pushes++;
      hadd(&S.lat, lat);
    }
  } else {
    count_error(now, "", r->status, r->body, r->body_len);
  }
}

static void on_readable(conn *c, uint64_t now) {
  for (;;) {
    if (c->rcap - c->rlen < RCHUNK) {
      size_t nc = c->rcap ? c->rcap * 2 : 2 * RCHUNK;
      c->rb = realloc(c->rb, nc);
      if (!c->rb) die("out of memory");
      c->rcap = nc;
    }
    ssize_t n = recv(c->fd, c->rb + c->rlen, c->rcap - c->rlen, 0);
    int eof = 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      conn_down(c, now, c->state == C_BUSY ? "reset" : "eof_idle");
      return;
    }
    if (n == 0) eof = 1;
    c->rlen += (size_t)n;
    // parse as many complete responses as the buffer holds
    for (;;) {
      if (!c->rlen) break;
      resp_t r;
      long used = parse_response(c->rb, c->rlen, eof, &r);
      if (used < 0) {
        if (c->state == C_BUSY && c->kind == K_REGISTER) die("register: malformed HTTP response");
        conn_down(c, now, "parse");
        return;
      }
      if (used == 0) break;
      if (c->state != C_BUSY) {  // an answer nobody asked for
        conn_down(c, now, "unsolicited");
        return;
      }
      if (!r.interim) on_response(c, &r, now);
      memmove(c->rb, c->rb + used, c->rlen - (size_t)used);
      c->rlen -= (size_t)used;
      if (!r.interim && r.close) {
        conn_down(c, now, "conn_close");
        return;
      }
    }
    if (eof) {
      conn_down(c, now, c->state == C_BUSY ? "closed" : "eof_idle");
      return;
    }
    if (c->state == C_IDLE && !c->queued) idle_push(c);
    if ((size_t)n < RCHUNK) return;  // drained (level-triggered epoll reports more)
  }
}

static void on_event(conn *c, uint32_t ev, uint64_t now) {
  if (c->state == C_CONNECTING) {
    if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    if (!err && getpeername(c->fd, (struct sockaddr *)&peer, &pl) < 0) {
      if (errno == ENOTCONN && !(ev & (EPOLLERR | EPOLLHUP))) return;  // not connected yet (stale event)
      err = errno;
    }
    if (err) {
      if (S.phase == PH_SETUP && now > S.t_setup_deadline) die("cannot connect to %s: %s", O.target, strerror(err));
      snprintf(g_last_connect_err, sizeof g_last_connect_err, "%s", strerror(err));
      count_error(now, "connect", 0, NULL, 0);
      conn_down(c, now, "connect");
      return;
    }
    ep_set(c, 0);
    idle_push(c);
    return;
  }
  if (ev & EPOLLOUT) conn_flush(c, now);
  if (c->fd >= 0 && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) on_readable(c, now);
}

// Hand idle connections work.
static void dispatch(uint64_t now) {
  if (S.phase == PH_SETUP) {
    while (S.next_reg_setup < O.regs) {
      conn *c = idle_pop();
      if (!c) break;
      send_register(c, now);
    }
    return;
  }
  if (S.phase != PH_RUN) return;
  if (O.rate <= 0) {  // closed loop
    if (now >= S.t_meas1) return;
    conn *c;
    while ((c = idle_pop())) send_push(c, now, now);
    return;
  }
  // open loop: intended send times t_go + i / rate, for times before the window's end
  for (;;) {
    uint64_t due = S.t_go + (uint64_t)((double)S.open_idx * S.iv_ns);
    if (due > now || due >= S.t_meas1) break;
    conn *c = idle_pop();
    if (!c) {
      // every connection is busy: each push that has come due and is not yet counted is late
      uint64_t ndue = (uint64_t)((double)(now - S.t_go) / S.iv_ns) + 1;
      uint64_t j = S.late_upto > S.open_idx ? S.late_upto : S.open_idx;
      for (; j < ndue; j++) {
        uint64_t dj = S.t_go + (uint64_t)((double)j * S.iv_ns);
        if (dj >= S.t_meas1) break;
        S.v_late++;
        if (in_window(dj)) S.late++;
      }
      if (j > S.late_upto) S.late_upto = j;
      break;
    }
    send_push(c, due, now);
    S.open_idx++;
  }
}

// ---------------------------------------------------------------- self test
static int self_test(void) {
  int fails = 0;
  uint8_t key[32];
  int kl = b64dec("CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=", 44, key, sizeof key);
  int kok = kl == 32;
  for (int i = 0; i < 32 && kok; i++) kok = key[i] == 9;
  printf("base64 secret decode: %s\n", kok ? "ok" : "FAIL");
  fails += !kok;
  const char *want = "b9689929193047028a1eb888c93cbf5c147c3333dc6fb0cd7bda1b02dc4af3d4";
  char sig[65];
  sign(key, "1700000000", 10, "{\"macID\":\"m\"}", 13, sig);
  int ok = !strcmp(sig, want);
  printf("signature vector (push.md 2.9): %s (%s)\n", ok ? "ok" : "FAIL", sig);
  fails += !ok;
  char s2[65], s3[65];
  sign(key, "1700000001", 10, "{\"macID\":\"m\"}", 13, s2);
  sign(key, "1700000000", 10, "{\"macID\":\"other\"}", 17, s3);
  ok = strcmp(s2, sig) && strcmp(s3, sig);
  printf("signature changes with timestamp and body: %s\n", ok ? "ok" : "FAIL");
  fails += !ok;
  // HTTP/1.1 parser
  // used: -1 malformed, 0 incomplete, 1 the whole input, else that many bytes
  struct { const char *in; int eof; long used; int status, close; const char *body; } T[] = {
      {"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}", 0, 1, 200, 0, "{\"ok\":true}"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":tr", 0, 0, 0, 0, NULL},
      {"HTTP/1.1 401 Unauthorized\r\nContent-Length:  24 \r\nConnection: close\r\n\r\n{\"error\":\"unauthorized\"}", 0, 1, 401, 1, "{\"error\":\"unauthorized\"}"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n{\"ok\":true}\r\n0\r\n\r\n", 0, 1, 200, 0, "{\"ok\":true}"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n{\"ok\":true}\r\n0\r\n", 0, 0, 0, 0, NULL},
      {"HTTP/1.1 100 Continue\r\n\r\n", 0, 25, 100, 0, NULL},
      {"HTTP/1.0 200 OK\r\n\r\n{\"ok\":true}", 1, 1, 200, 1, "{\"ok\":true}"},
      {"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200", 0, 27, 204, 0, NULL},
      {"HTTP/1.1 2x0 OK\r\n\r\n", 0, -1, 0, 0, NULL},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 0, -1, 0, 0, NULL},
  };
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
    resp_t r;
    long u = parse_response((const uint8_t *)T[i].in, strlen(T[i].in), T[i].eof, &r);
    long want = T[i].used == 1 ? (long)strlen(T[i].in) : T[i].used;
    int good = u == want;
    if (good && u > 0) {
      good = r.status == T[i].status && r.close == T[i].close;
      if (T[i].body) good = good && r.body_len == strlen(T[i].body) && !memcmp(r.body, T[i].body, r.body_len);
    }
    if (!good) printf("http parser case %zu: FAIL (used %ld, want %ld)\n", i, u, want);
    fails += !good;
  }
  printf("http parser: %s\n", fails ? "see above" : "ok");
  char pid[64], sec[64];
  const char *js = "{\"pushID\":\"0b6f7c1e-1a2b-4c3d-8e9f-0123456789ab\", \"relaySecret\" : \"CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=\"}";
  ok = json_str(js, strlen(js), "pushID", pid, sizeof pid) == 36 && json_str(js, strlen(js), "relaySecret", sec, sizeof sec) == 44;
  printf("register response parse: %s\n", ok ? "ok" : "FAIL");
  fails += !ok;
  printf("self-test: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}

// ---------------------------------------------------------------- main
static void usage(void) {
  fprintf(stderr,
          "usage: pushload [options] HOST:PORT          (HOST must be a 127.x.x.x address)\n"
          "       pushload --self-test\n"
          "  -c CONNS            keep-alive connections (default 16 closed loop, 64 open loop)\n"
          "  --rate R            open loop: R pushes/s at fixed intended times (default: closed loop)\n"
          "  -t SECONDS          measured window (default 10)\n"
          "  --warmup S          load before the window, not counted (default 1)\n"
          "  --registrations K   devices registered in setup; pushes go round-robin (default 100)\n"
          "  --environment E     production (default) or sandbox\n"
          "  --ciphertext-bytes N  raw bytes behind the body's base64 ciphertext (default 88 -> 120 chars)\n"
          "  --fresh-bodies      new body (collapseID) and signature per push (default: one body per\n"
          "                      registration, signed request cached per second)\n"
          "  --timeout S         per-request timeout (default 10)   --setup-timeout S (default 30)\n"
          "  --drain S           wait for in-flight answers after the window (default 2)\n"
          "  --pid PID           sample the target's /proc/PID (RSS, CPU, threads, fds)\n"
          "  --label STR   -v (per-second progress on stderr)   --self-test (vectors, parser; exit)\n");
  exit(2);
}

static int is_loopback(struct in_addr a) { return (ntohl(a.s_addr) >> 24) == 127; }

static void progress(uint64_t now) {
  double t = (double)(now - S.t_go) / 1e9;
  fprintf(stderr, "pushload: %s t=%.0fs ok/s=%llu sent/s=%llu err=%llu late=%llu busy=%d/%d p50_us=%llu p99_us=%llu max_us=%llu\n",
          S.phase == PH_SETUP ? "setup" : (now < S.t_meas0 ? "warmup" : "run"), S.phase == PH_SETUP ? 0.0 : t,
          (unsigned long long)S.v_ok, (unsigned long long)S.v_sent, (unsigned long long)S.v_err,
          (unsigned long long)S.v_late, S.busy, O.conns, (unsigned long long)hpct(&S.v_lat, 50),
          (unsigned long long)hpct(&S.v_lat, 99), (unsigned long long)S.v_lat.max);
  S.v_ok = S.v_err = S.v_late = S.v_sent = 0;
  memset(&S.v_lat, 0, sizeof S.v_lat);
}

int main(int argc, char **argv) {
  O.conns = -1;
  O.regs = 100;
  O.duration = 10;
  O.warmup = 1;
  O.timeout = 10;
  O.setup_timeout = 30;
  O.drain = 2;
  O.ct_bytes = 88;
  strcpy(O.env, "production");
  int selftest = 0;
  static struct option lo[] = {
      {"rate", required_argument, 0, 1},          {"warmup", required_argument, 0, 2},
      {"registrations", required_argument, 0, 3}, {"pid", required_argument, 0, 4},
      {"label", required_argument, 0, 5},         {"self-test", no_argument, 0, 6},
      {"timeout", required_argument, 0, 7},       {"setup-timeout", required_argument, 0, 8},
      {"drain", required_argument, 0, 9},         {"environment", required_argument, 0, 10},
      {"ciphertext-bytes", required_argument, 0, 11}, {"fresh-bodies", no_argument, 0, 12},
      {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "c:t:vh", lo, NULL)) != -1) {
    switch (ch) {
      case 'c': O.conns = atoi(optarg); break;
      case 't': O.duration = atof(optarg); break;
      case 'v': O.verbose = 1; break;
      case 1: O.rate = atof(optarg); break;
      case 2: O.warmup = atof(optarg); break;
      case 3: O.regs = atoi(optarg); break;
      case 4: O.pid = (pid_t)atoi(optarg); break;
      case 5: snprintf(O.label, sizeof O.label, "%s", optarg); break;
      case 6: selftest = 1; break;
      case 7: O.timeout = atof(optarg); break;
      case 8: O.setup_timeout = atof(optarg); break;
      case 9: O.drain = atof(optarg); break;
      case 10: snprintf(O.env, sizeof O.env, "%s", optarg); break;
      case 11: O.ct_bytes = atoi(optarg); break;
      case 12: O.fresh = 1; break;
      default: usage();
    }
  }
  if (selftest) return self_test();
  if (optind != argc - 1) usage();
  snprintf(O.target, sizeof O.target, "%s", argv[optind]);
  char host[64];
  char *colon = strrchr(O.target, ':');
  if (!colon || colon - O.target >= (long)sizeof host) die("target must be HOST:PORT");
  memcpy(host, O.target, (size_t)(colon - O.target));
  host[colon - O.target] = 0;
  if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
  O.dst.sin_family = AF_INET;
  O.dst.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &O.dst.sin_addr) != 1) die("bad host %s (IPv4 literal expected)", host);
  if (!is_loopback(O.dst.sin_addr)) die("refusing non-loopback target %s: this harness only drives 127.0.0.0/8", host);
  snprintf(g_hosthdr, sizeof g_hosthdr, "%s:%d", host, ntohs(O.dst.sin_port));
  for (size_t i = 0; i < strlen(O.label); i++) if (O.label[i] == '"' || O.label[i] == '\\') O.label[i] = '_';
  if (O.conns < 0) O.conns = O.rate > 0 ? 64 : 16;
  if (O.conns < 1 || O.conns > 60000) die("bad -c");
  if (O.regs < 1 || O.regs > 10000000) die("bad --registrations");
  if (O.duration <= 0 || O.warmup < 0) die("bad -t/--warmup");
  if (O.rate < 0) die("bad --rate");
  if (O.ct_bytes < 1 || O.ct_bytes > 2000) die("bad --ciphertext-bytes");
  if (strcmp(O.env, "production") && strcmp(O.env, "sandbox")) fprintf(stderr, "pushload: note: environment %s is not valid for Profile M\n", O.env);
  g_target = O.pid;

  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  signal(SIGPIPE, SIG_IGN);

  procsample_t s_start = sample_proc(O.pid);
  if (O.pid && !s_start.ok) die("cannot read /proc/%d", (int)O.pid);

  // registrations: random device tokens and one fixed body each
  S.regs = calloc((size_t)O.regs, sizeof *S.regs);
  if (!S.regs) die("out of memory");
  uint8_t *ct = malloc((size_t)O.ct_bytes);
  char *ct64 = malloc((size_t)O.ct_bytes * 2 + 8);
  for (int i = 0; i < O.regs; i++) {
    reg_t *r = &S.regs[i];
    uint8_t tok[32];
    rand_bytes(tok, 32);
    hex_lower(tok, 32, r->token);
    rand_bytes(ct, (size_t)O.ct_bytes);
    b64enc(ct, (size_t)O.ct_bytes, ct64);
    char mac[37], col[37];
    uuid_upper(mac);
    uuid_upper(col);
    int n = snprintf(r->body, sizeof r->body,
                     "{\"macID\":\"%s\",\"ciphertext\":\"%s\",\"collapseID\":\"%s\",\"title\":\"Mytty\",\"placeholder\":\"Approval requested\"}",
                     mac, ct64, col);
    if (n < 0 || (size_t)n >= sizeof r->body) die("body too long (--ciphertext-bytes)");
    r->body_len = (size_t)n;
    r->req_ts = -1;
  }
  free(ct);
  free(ct64);

  S.epfd = epoll_create1(EPOLL_CLOEXEC);
  if (S.epfd < 0) die("epoll_create1: %s", strerror(errno));
  S.conns = calloc((size_t)O.conns, sizeof *S.conns);
  S.idle = calloc((size_t)O.conns, sizeof *S.idle);
  if (!S.conns || !S.idle) die("out of memory");
  S.iv_ns = O.rate > 0 ? 1e9 / O.rate : 0;

  uint64_t t0 = now_ns();
  S.phase = PH_SETUP;
  S.t_setup_deadline = t0 + (uint64_t)(O.setup_timeout * 1e9);
  S.t_next_tick = t0 + 1000000000ull;
  S.t_next_scan = t0 + 100000000ull;
  S.now_wall = wall_sec();
  for (int i = 0; i < O.conns; i++) {
    S.conns[i].fd = -1;
    S.conns[i].idx = i;
    conn_connect(&S.conns[i], t0);
  }
  procsample_t s_ready = {0};
  double setup_s = 0;
  double cpu_go = 0;
  struct epoll_event evs[512];
  for (;;) {
    uint64_t now = now_ns();
    // ---- phase transitions and timers
    if (S.phase == PH_SETUP && S.nregs_ok == O.regs) {
      setup_s = (double)(now - t0) / 1e9;
      s_ready = sample_proc(O.pid);
      now = now_ns();
      S.phase = PH_RUN;
      S.t_go = now;
      S.t_meas0 = now + (uint64_t)(O.warmup * 1e9);
      S.t_meas1 = S.t_meas0 + (uint64_t)(O.duration * 1e9);
      S.t_next_tick = now + 1000000000ull;
      cpu_go = cpu_self_s();
      if (O.verbose) fprintf(stderr, "pushload: %d registrations in %.3f s\n", O.regs, setup_s);
    }
    if (S.phase == PH_SETUP && now > S.t_setup_deadline)
      die("setup timed out: %d of %d registrations done (last connect error: %s)", S.nregs_ok, O.regs,
          g_last_connect_err);
    if (S.phase >= PH_RUN && !S.meas_started && now >= S.t_meas0) {
      S.meas_started = 1;
      S.s_m0 = sample_proc(O.pid);
      S.h_m0 = sample_host();
      scan_procs(&S.p_m0);
      S.cpu_meas0 = cpu_self_s();
    }
    if (S.phase == PH_RUN && now >= S.t_meas1) {
      S.meas_ended = 1;
      S.s_m1 = sample_proc(O.pid);
      S.h_m1 = sample_host();
      scan_procs(&S.p_m1);
      S.foreign_s = foreign_cpu_s(&S.p_m0, &S.p_m1);
      S.cpu_meas1 = cpu_self_s();
      S.phase = PH_DRAIN;
      S.t_drain_end = now + (uint64_t)(O.drain * 1e9);
    }
    if (S.phase == PH_DRAIN && (S.busy == 0 || now >= S.t_drain_end)) break;
    if (now >= S.t_next_scan) {
      S.t_next_scan = now + 100000000ull;
      S.now_wall = wall_sec();
      uint64_t tmo = (uint64_t)(O.timeout * 1e9);
      for (int i = 0; i < O.conns; i++) {
        conn *c = &S.conns[i];
        if (c->state == C_BUSY && now - c->t_sent > tmo) {
          if (c->kind == K_REGISTER) die("register request timed out");
          conn_down(c, now, "timeout");
        } else if (c->state == C_DOWN && c->t_retry <= now) {
          conn_connect(c, now);
        }
      }
    }
    if (now >= S.t_next_tick) {
      S.t_next_tick += 1000000000ull;
      if (S.t_next_tick <= now) S.t_next_tick = now + 1000000000ull;
      if (O.verbose) progress(now);
    }
    dispatch(now);

    // ---- wait
    uint64_t next = S.t_next_tick < S.t_next_scan ? S.t_next_tick : S.t_next_scan;
    if (S.phase >= PH_RUN && !S.meas_started && S.t_meas0 < next) next = S.t_meas0;
    if (S.phase == PH_RUN && S.t_meas1 < next) next = S.t_meas1;
    if (S.phase == PH_DRAIN && S.t_drain_end < next) next = S.t_drain_end;
    if (S.phase == PH_RUN && O.rate > 0 && S.idle_n) {
      uint64_t due = S.t_go + (uint64_t)((double)S.open_idx * S.iv_ns);
      if (due < next) next = due;
    }
    now = now_ns();
    uint64_t d = next > now ? next - now : 0;
    struct timespec ts = {.tv_sec = (time_t)(d / 1000000000ull), .tv_nsec = (long)(d % 1000000000ull)};
    int n = epoll_pwait2(S.epfd, evs, 512, &ts, NULL);
    if (n < 0 && errno != EINTR) die("epoll_pwait2: %s", strerror(errno));
    now = now_ns();
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (c->fd < 0) continue;
      on_event(c, evs[i].events, now);
    }
  }
  uint64_t inflight_end = (uint64_t)S.busy;
  uint64_t backlog_end = 0;
  if (O.rate > 0) {
    uint64_t total_due = (uint64_t)ceil((double)(S.t_meas1 - S.t_go) / S.iv_ns);
    backlog_end = total_due > S.open_idx ? total_due - S.open_idx : 0;
  }
  double cpu_total = cpu_self_s();
  for (int i = 0; i < O.conns; i++) if (S.conns[i].fd >= 0) { close(S.conns[i].fd); S.conns[i].fd = -1; }
  procsample_t s_done = sample_proc(O.pid);
  if (O.pid) usleep(1000000);
  procsample_t s_after = sample_proc(O.pid);

  // ---- JSON
  FILE *o = stdout;
  double T = O.duration;
  time_t wall = time(NULL);
  char tsb[32];
  strftime(tsb, sizeof tsb, "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
  fprintf(o, "{\"tool\":\"pushload\",\"v\":%s,\"time\":\"%s\",\"label\":\"%s\",\"mode\":\"%s\",\"target\":\"%s\"",
          PUSHLOAD_VERSION, tsb, O.label, O.rate > 0 ? "open" : "closed", O.target);
  fprintf(o, ",\"ok\":true,\"connections\":%d,\"registrations\":%d,\"fresh_bodies\":%s,\"body_bytes\":%zu,\"setup_s\":%.3f",
          O.conns, O.regs, O.fresh ? "true" : "false", S.regs[0].body_len, setup_s);
  fprintf(o, ",\"duration_s\":%.1f,\"warmup_s\":%.1f", O.duration, O.warmup);
  if (O.rate > 0) fprintf(o, ",\"rate\":%.1f", O.rate);
  fprintf(o, ",\"pushes\":%llu,\"pushes_per_s\":%.1f,\"sent\":%llu,\"sent_per_s\":%.1f", (unsigned long long)S.pushes,
          S.pushes / T, (unsigned long long)S.sent, S.sent / T);
  if (O.rate > 0)
    fprintf(o, ",\"late\":%llu,\"backlog_at_end\":%llu", (unsigned long long)S.late, (unsigned long long)backlog_end);
  fprintf(o, ",\"in_flight_at_end\":%llu", (unsigned long long)inflight_end);
  fprintf(o, ",\"errors\":{\"total\":%llu", (unsigned long long)S.errors);
  jerrmap(o, "by_status", &S.by_status);
  jerrmap(o, "by_kind", &S.by_kind);
  if (S.err_sample[0]) fprintf(o, ",\"sample\":\"%s\"", S.err_sample);
  fprintf(o, "}");
  const hist_t *h = &S.lat;
  fprintf(o, ",\"latency_us\":{\"n\":%llu,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu,\"mean\":%.1f}",
          (unsigned long long)h->n, (unsigned long long)hpct(h, 50), (unsigned long long)hpct(h, 90),
          (unsigned long long)hpct(h, 99), (unsigned long long)hpct(h, 99.9), (unsigned long long)h->max,
          h->n ? (double)h->sum / (double)h->n : 0.0);
  h = &S.reg_lat;
  fprintf(o, ",\"register_us\":{\"n\":%llu,\"p50\":%llu,\"p99\":%llu,\"max\":%llu}", (unsigned long long)h->n,
          (unsigned long long)hpct(h, 50), (unsigned long long)hpct(h, 99), (unsigned long long)h->max);
  double gcpu = S.cpu_meas1 - S.cpu_meas0;
  fprintf(o, ",\"gen\":{\"cpu_window_s\":%.2f,\"cpu_window_pct\":%.1f,\"cpu_run_s\":%.2f,\"cpu_total_s\":%.2f}", gcpu,
          100.0 * gcpu / T, cpu_total - cpu_go, cpu_total);
  jhost(o, &S.h_m0, &S.h_m1);
  fprintf(o, ",\"foreign\":{\"cpu_s\":%.2f,\"cpu_pct\":%.1f}", S.foreign_s, 100.0 * S.foreign_s / T);
  if (O.pid) {
    double dc = S.s_m1.cpu_s - S.s_m0.cpu_s;
    fprintf(o, ",\"target_proc\":{\"pid\":%d,\"cpu_window_s\":%.2f,\"cpu_window_pct\":%.1f,\"cpu_setup_s\":%.2f", (int)O.pid, dc,
            100.0 * dc / T, s_ready.cpu_s - s_start.cpu_s);
    jsample(o, "start", s_start);
    jsample(o, "ready", s_ready);
    jsample(o, "window_start", S.s_m0);
    jsample(o, "window_end", S.s_m1);
    jsample(o, "done", s_done);
    jsample(o, "after", s_after);
    fprintf(o, "}");
  }
  fprintf(o, "}\n");
  fflush(o);
  return 0;
}
