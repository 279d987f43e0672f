// apns-sink — a fast stand-in for the APNs provider API, for `tether push` throughput runs.
//
// TLS (OpenSSL, ALPN "h2" only) + HTTP/2 (libnghttp2 server sessions) on non-blocking sockets
// and epoll; one event loop per thread (-t N threads share the port with SO_REUSEPORT).
//
//   POST /3/device/<hex token>  -> once the request's END_STREAM arrives: :status 200,
//                                  apns-id: <UUID-shaped id>, empty body
//                                  (after --delay-us N µs, to model APNs latency)
//   anything else               -> :status 404, {"reason":"BadPath"}
//
// No JWT verification (speed); a request whose `authorization` header does not start with
// "bearer " is answered the same but counted as bad_auth.
// Service time per request: END_STREAM received (plus --delay-us, i.e. from the moment the
// answer was due) -> response submitted and its bytes written to the socket, in µs.
//
// Prints "apns-sink: listening on 127.0.0.1:PORT" (flushed) when ready. On SIGTERM/SIGINT prints
// one JSON line of statistics on stdout and exits 0; with --stats-file F the same line is also
// written to F at exit and on every SIGUSR1 (the sink keeps running; F is replaced atomically).
//
// A certificate for 127.0.0.1 (the relay verifies it: point its APNS_CA_FILE at cert.pem and
// APNS_PRODUCTION_URL at https://127.0.0.1:PORT):
//   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30
//     -keyout key.pem -out cert.pem -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost
//
// Build: make apns-sink   (-lssl -lcrypto -lnghttp2)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define RBUF 16384
#define OUT_HIGH 32768  // gather nghttp2 output up to this much per SSL_write

// ---------------------------------------------------------------- utilities

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "apns-sink: ");
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

// ---------------------------------------------------------------- histogram
// Log-linear buckets over nanoseconds: exact below 128, then 64 sub-buckets per power of two
// (<= ~1.6% relative error) — the same layout as wsload's, one unit finer.
#define HB 2560
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
static void hmerge(hist_t *d, const hist_t *s) {
  if (!s->n) return;
  for (int i = 0; i < HB; i++) d->b[i] += s->b[i];
  if (d->n == 0 || s->min < d->min) d->min = s->min;
  if (s->max > d->max) d->max = s->max;
  d->n += s->n;
  d->sum += s->sum;
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

// ---------------------------------------------------------------- options & stats
static struct {
  struct sockaddr_in addr;
  const char *cert, *key, *stats_file;
  int threads;
  uint32_t max_streams;
  uint64_t delay_ns;
  uint32_t delay_us;
} O;

typedef struct {
  uint64_t conns_opened, conns_h2, tls_failed, conns_closed;
  uint64_t requests, ok, not_found, bad_auth, streams_reset, dropped_late;
  hist_t svc;  // ns
} stats_t;

static void merge_stats(stats_t *d, const stats_t *s) {
  d->conns_opened += s->conns_opened;
  d->conns_h2 += s->conns_h2;
  d->tls_failed += s->tls_failed;
  d->conns_closed += s->conns_closed;
  d->requests += s->requests;
  d->ok += s->ok;
  d->not_found += s->not_found;
  d->bad_auth += s->bad_auth;
  d->streams_reset += s->streams_reset;
  d->dropped_late += s->dropped_late;
  hmerge(&d->svc, &s->svc);
}

// ---------------------------------------------------------------- per-thread state
typedef struct conn conn;
typedef struct {
  conn *c;
  uint32_t gen;
  int32_t stream_id;
  uint64_t due;
} delayed_t;

typedef struct worker {
  int idx, epfd, lfd, evfd;
  pthread_t th;
  SSL_CTX *ctx;
  nghttp2_session_callbacks *cbs;
  nghttp2_option *opt;
  conn *dirty;
  conn *freelist;
  uint64_t id_ctr;
  // FIFO of delayed answers; with a constant delay, FIFO order is due-time order.
  delayed_t *dq;
  size_t dq_cap, dq_h, dq_n;
  stats_t st;
  // snapshot hand-off to the main thread
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int snap_req, snap_done;
  stats_t snap;
} worker;

struct conn {
  int fd;
  uint32_t gen;
  uint8_t h2, in_dirty, want_out, closing;
  uint64_t nreq, nrst_in;  // this connection's requests, RST_STREAMs received (diagnostics)
  SSL *ssl;
  nghttp2_session *h2s;
  worker *w;
  uint8_t *ob;
  size_t olen, ocap;
  uint64_t *pend;  // due times of responses submitted but not yet written out
  size_t npend, cpend;
  conn *dnext, *fnext;
};

static volatile sig_atomic_t g_stop;
static worker W[MAX_THREADS];

// Stream flags, stored as the stream's user data (no allocation per stream).
enum { SF_SEEN = 1, SF_POST = 2, SF_PATH = 4, SF_AUTH = 8, SF_ANSWERED = 16 };

static void ep_set(conn *c, int out) {
  if (out == c->want_out) return;
  c->want_out = (uint8_t)out;
  struct epoll_event e = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e);
}

static void mark_dirty(conn *c) {
  if (!c->in_dirty) {
    c->in_dirty = 1;
    c->dnext = c->w->dirty;
    c->w->dirty = c;
  }
}

static void conn_close(conn *c) {
  if (c->fd < 0) return;
  worker *w = c->w;
  epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  if (c->h2s) nghttp2_session_del(c->h2s);
  c->h2s = NULL;
  if (c->ssl) SSL_free(c->ssl);
  c->ssl = NULL;
  c->olen = 0;
  c->npend = 0;
  c->gen++;
  w->st.conns_closed++;
  // The struct goes back to the free list once it is off the dirty list (see flush_dirty).
  if (!c->in_dirty) {
    c->fnext = w->freelist;
    w->freelist = c;
  } else {
    c->closing = 1;
  }
}

// ---------------------------------------------------------------- HTTP/2 answers
static const char BADPATH[] = "{\"reason\":\"BadPath\"}";

static ssize_t badpath_read(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *ud) {
  (void)s; (void)sid; (void)src; (void)ud;
  size_t n = sizeof BADPATH - 1;
  if (n > len) n = len;  // never happens (len >= 16 KiB)
  memcpy(buf, BADPATH, n);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

#define MKNV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}

static void answer(conn *c, int32_t sid, uint64_t due) {
  worker *w = c->w;
  uintptr_t f = (uintptr_t)nghttp2_session_get_stream_user_data(c->h2s, sid);
  if (!(f & SF_SEEN) || (f & SF_ANSWERED)) {  // stream gone (reset by the peer) or answered
    w->st.dropped_late++;
    return;
  }
  nghttp2_session_set_stream_user_data(c->h2s, sid, (void *)(f | SF_ANSWERED));
  int rv;
  if ((f & (SF_POST | SF_PATH)) == (SF_POST | SF_PATH)) {
    // apns-id: UUID-shaped, unique per thread (thread index + counter)
    char id[37];
    uint64_t k = ++w->id_ctr;
    static const char hx[] = "0123456789abcdef";
    memcpy(id, "00000000-0000-4000-8000-000000000000", 37);
    id[6] = hx[(w->idx >> 4) & 15];
    id[7] = hx[w->idx & 15];
    for (int i = 0; i < 12; i++) id[35 - i] = hx[(k >> (4 * i)) & 15];
    nghttp2_nv nv[2] = {MKNV(":status", "200"),
                        {(uint8_t *)"apns-id", (uint8_t *)id, 7, 36, NGHTTP2_NV_FLAG_NO_COPY_NAME}};
    rv = nghttp2_submit_response(c->h2s, sid, nv, 2, NULL);
    w->st.ok++;
  } else {
    nghttp2_nv nv[2] = {MKNV(":status", "404"), MKNV("content-type", "application/json")};
    nghttp2_data_provider dp = {.source.ptr = NULL, .read_callback = badpath_read};
    rv = nghttp2_submit_response(c->h2s, sid, nv, 2, &dp);
    w->st.not_found++;
  }
  if (rv != 0) return;
  if (c->npend == c->cpend) {
    c->cpend = c->cpend ? c->cpend * 2 : 64;
    c->pend = realloc(c->pend, c->cpend * sizeof *c->pend);
    if (!c->pend) die("out of memory");
  }
  c->pend[c->npend++] = due;
  mark_dirty(c);
}

static void dq_push(worker *w, conn *c, int32_t sid, uint64_t due) {
  if (w->dq_n == w->dq_cap) {
    size_t nc = w->dq_cap ? w->dq_cap * 2 : 1024;
    delayed_t *nq = malloc(nc * sizeof *nq);
    if (!nq) die("out of memory");
    for (size_t i = 0; i < w->dq_n; i++) nq[i] = w->dq[(w->dq_h + i) % w->dq_cap];
    free(w->dq);
    w->dq = nq;
    w->dq_cap = nc;
    w->dq_h = 0;
  }
  w->dq[(w->dq_h + w->dq_n) % w->dq_cap] = (delayed_t){c, c->gen, sid, due};
  w->dq_n++;
}

static void run_due(worker *w, uint64_t now) {
  while (w->dq_n) {
    delayed_t *d = &w->dq[w->dq_h];
    if (d->due > now) break;
    delayed_t e = *d;
    w->dq_h = (w->dq_h + 1) % w->dq_cap;
    w->dq_n--;
    if (e.c->fd >= 0 && e.c->gen == e.gen && e.c->h2s) answer(e.c, e.stream_id, e.due);
    else w->st.dropped_late++;
  }
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *fr, void *ud) {
  (void)ud;
  if (fr->hd.type == NGHTTP2_HEADERS && fr->headers.cat == NGHTTP2_HCAT_REQUEST)
    nghttp2_session_set_stream_user_data(s, fr->hd.stream_id, (void *)(uintptr_t)SF_SEEN);
  return 0;
}

static int is_hex(const uint8_t *p, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t ch = p[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))) return 0;
  }
  return 1;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name, size_t nl, const uint8_t *val,
                     size_t vl, uint8_t flags, void *ud) {
  (void)flags; (void)ud;
  if (fr->hd.type != NGHTTP2_HEADERS || fr->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  uintptr_t f = (uintptr_t)nghttp2_session_get_stream_user_data(s, fr->hd.stream_id);
  if (!f) return 0;
  uintptr_t g = f;
  if (nl == 5 && !memcmp(name, ":path", 5)) {
    if (vl > 10 && !memcmp(val, "/3/device/", 10) && is_hex(val + 10, vl - 10)) g |= SF_PATH;
  } else if (nl == 7 && !memcmp(name, ":method", 7)) {
    if (vl == 4 && !memcmp(val, "POST", 4)) g |= SF_POST;
  } else if (nl == 13 && !memcmp(name, "authorization", 13)) {
    if (vl >= 7 && !memcmp(val, "bearer ", 7)) g |= SF_AUTH;
  }
  if (g != f) nghttp2_session_set_stream_user_data(s, fr->hd.stream_id, (void *)g);
  return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *fr, void *ud) {
  conn *c = ud;
  if (fr->hd.type == NGHTTP2_RST_STREAM) {
    c->nrst_in++;
    return 0;
  }
  if (fr->hd.type == NGHTTP2_GOAWAY) {
    if (fr->goaway.error_code != NGHTTP2_NO_ERROR)
      fprintf(stderr, "apns-sink: peer sent GOAWAY %s (last_stream_id %d) after %llu requests\n",
              nghttp2_http2_strerror(fr->goaway.error_code), fr->goaway.last_stream_id,
              (unsigned long long)c->nreq);
    return 0;
  }
  if ((fr->hd.type != NGHTTP2_HEADERS && fr->hd.type != NGHTTP2_DATA) || !(fr->hd.flags & NGHTTP2_FLAG_END_STREAM))
    return 0;
  uintptr_t f = (uintptr_t)nghttp2_session_get_stream_user_data(s, fr->hd.stream_id);
  if (!(f & SF_SEEN)) return 0;
  worker *w = c->w;
  w->st.requests++;
  c->nreq++;
  if (!(f & SF_AUTH)) w->st.bad_auth++;
  uint64_t t = now_ns();
  if (O.delay_ns) dq_push(w, c, fr->hd.stream_id, t + O.delay_ns);
  else answer(c, fr->hd.stream_id, t);
  return 0;
}

// Every GOAWAY the sink sends, with its cause where nghttp2 gives one (see on_error). nghttp2 queues
// some GOAWAYs without nghttp2_session_mem_recv failing (flood and rate limits), so this is the
// place that sees a connection being ended by our side.
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *fr, void *ud) {
  (void)s;
  conn *c = ud;
  if (fr->hd.type == NGHTTP2_GOAWAY)
    fprintf(stderr, "apns-sink: sent GOAWAY %s (last_stream_id %d) after %llu requests, %llu RST_STREAM received\n",
            nghttp2_http2_strerror(fr->goaway.error_code), fr->goaway.last_stream_id, (unsigned long long)c->nreq,
            (unsigned long long)c->nrst_in);
  return 0;
}

static int on_error(nghttp2_session *s, int lib_error_code, const char *msg, size_t len, void *ud) {
  (void)s; (void)ud;
  fprintf(stderr, "apns-sink: nghttp2: %.*s (%s)\n", (int)len, msg, nghttp2_strerror(lib_error_code));
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t sid, uint32_t code, void *ud) {
  (void)s; (void)sid;
  conn *c = ud;
  if (code != NGHTTP2_NO_ERROR) c->w->st.streams_reset++;
  return 0;
}

// ---------------------------------------------------------------- I/O
static void flush_conn(conn *c);

static void ob_reserve(conn *c, size_t need) {
  if (c->ocap - c->olen >= need) return;
  size_t nc = c->ocap ? c->ocap : 65536;
  while (nc - c->olen < need) nc *= 2;
  c->ob = realloc(c->ob, nc);
  if (!c->ob) die("out of memory");
  c->ocap = nc;
}

// Write c->ob through TLS. Returns 1 when all written, 0 when blocked, -1 on error.
static int ob_write(conn *c) {
  while (c->olen) {
    ERR_clear_error();
    int n = SSL_write(c->ssl, c->ob, (int)c->olen);
    if (n > 0) {
      // SSL_MODE_ENABLE_PARTIAL_WRITE: n may be short.
      if ((size_t)n < c->olen) memmove(c->ob, c->ob + n, c->olen - (size_t)n);
      c->olen -= (size_t)n;
      continue;
    }
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) { ep_set(c, 1); return 0; }
    return -1;
  }
  return 1;
}

static void flush_conn(conn *c) {
  if (c->fd < 0 || !c->h2s) return;
  for (;;) {
    if (c->olen) {
      int r = ob_write(c);
      if (r < 0) { conn_close(c); return; }
      if (r == 0) return;
    }
    // gather nghttp2 output
    while (c->olen < OUT_HIGH) {
      const uint8_t *d;
      ssize_t n = nghttp2_session_mem_send(c->h2s, &d);
      if (n < 0) { conn_close(c); return; }
      if (n == 0) break;
      ob_reserve(c, (size_t)n);
      memcpy(c->ob + c->olen, d, (size_t)n);
      c->olen += (size_t)n;
    }
    if (!c->olen) break;
  }
  ep_set(c, 0);
  if (c->npend) {
    uint64_t t = now_ns();
    for (size_t i = 0; i < c->npend; i++) hadd(&c->w->st.svc, t > c->pend[i] ? t - c->pend[i] : 0);
    c->npend = 0;
  }
  if (!nghttp2_session_want_read(c->h2s) && !nghttp2_session_want_write(c->h2s)) conn_close(c);
}

static void flush_dirty(worker *w) {
  while (w->dirty) {
    conn *c = w->dirty;
    w->dirty = c->dnext;
    c->in_dirty = 0;
    if (c->closing) {
      c->closing = 0;
      c->fnext = w->freelist;
      w->freelist = c;
      continue;
    }
    flush_conn(c);
  }
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg) {
  (void)ssl; (void)arg;
  for (unsigned int i = 0; i < inlen;) {
    unsigned int l = in[i];
    if (i + 1 + l > inlen) break;
    if (l == 2 && !memcmp(in + i + 1, "h2", 2)) {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + l;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;  // h2 only
}

static void start_h2(conn *c) {
  worker *w = c->w;
  const unsigned char *p = NULL;
  unsigned int pl = 0;
  SSL_get0_alpn_selected(c->ssl, &p, &pl);
  if (pl != 2 || memcmp(p, "h2", 2)) {  // no ALPN at all: refuse
    w->st.tls_failed++;
    conn_close(c);
    return;
  }
  if (nghttp2_session_server_new2(&c->h2s, w->cbs, c, w->opt) != 0) die("nghttp2_session_server_new2");
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, O.max_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
  };
  nghttp2_submit_settings(c->h2s, NGHTTP2_FLAG_NONE, iv, 2);
  nghttp2_session_set_local_window_size(c->h2s, NGHTTP2_FLAG_NONE, 0, 1 << 24);
  c->h2 = 1;
  w->st.conns_h2++;
  mark_dirty(c);
}

static void on_conn_event(conn *c, uint32_t ev) {
  if (!c->h2) {
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r != 1) {
      int e = SSL_get_error(c->ssl, r);
      if (e == SSL_ERROR_WANT_READ) { ep_set(c, 0); return; }
      if (e == SSL_ERROR_WANT_WRITE) { ep_set(c, 1); return; }
      c->w->st.tls_failed++;
      conn_close(c);
      return;
    }
    start_h2(c);
    if (c->fd < 0) return;
    ev |= EPOLLIN;  // data may already be buffered in OpenSSL
  }
  if (ev & EPOLLOUT) mark_dirty(c);
  if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    uint8_t buf[RBUF];
    // Read until OpenSSL wants more bytes from the socket; level-triggered epoll would not
    // report data that OpenSSL has already buffered.
    for (;;) {
      ERR_clear_error();
      int n = SSL_read(c->ssl, buf, sizeof buf);
      if (n > 0) {
        ssize_t k = nghttp2_session_mem_recv(c->h2s, buf, (size_t)n);
        if (k < 0) {  // nghttp2 queued GOAWAY; flush then close
          fprintf(stderr, "apns-sink: connection ended by nghttp2: %s\n", nghttp2_strerror((int)k));
          mark_dirty(c);
          break;
        }
        continue;
      }
      int e = SSL_get_error(c->ssl, n);
      if (e == SSL_ERROR_WANT_READ) break;
      if (e == SSL_ERROR_WANT_WRITE) { ep_set(c, 1); break; }
      conn_close(c);  // EOF, close_notify or error
      return;
    }
    mark_dirty(c);
  }
}

// ---------------------------------------------------------------- listener & loop
static void accept_all(worker *w) {
  for (;;) {
    int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or EMFILE etc.: try again on the next event
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = w->freelist;
    if (c) w->freelist = c->fnext;
    else {
      c = calloc(1, sizeof *c);
      if (!c) die("out of memory");
      c->w = w;
    }
    c->fd = fd;
    c->h2 = 0;
    c->want_out = 0;
    c->closing = 0;
    c->olen = 0;
    c->npend = 0;
    c->nreq = c->nrst_in = 0;
    c->ssl = SSL_new(w->ctx);
    if (!c->ssl) die("SSL_new");
    SSL_set_fd(c->ssl, fd);
    SSL_set_accept_state(c->ssl);
    w->st.conns_opened++;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e);
    on_conn_event(c, EPOLLIN);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  struct epoll_event evs[256];
  for (;;) {
    struct timespec tmo, *tp = NULL;
    if (w->dq_n) {
      uint64_t now = now_ns(), due = w->dq[w->dq_h].due;
      uint64_t d = due > now ? due - now : 0;
      tmo.tv_sec = (time_t)(d / 1000000000ull);
      tmo.tv_nsec = (long)(d % 1000000000ull);
      tp = &tmo;
    }
    int n = epoll_pwait2(w->epfd, evs, 256, tp, NULL);
    if (n < 0 && errno != EINTR) die("epoll_pwait2: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
      void *p = evs[i].data.ptr;
      if (p == &w->lfd) accept_all(w);
      else if (p == &w->evfd) {
        uint64_t v;
        if (read(w->evfd, &v, sizeof v) < 0) { /* spurious */ }
      } else {
        conn *c = p;
        if (c->fd >= 0) on_conn_event(c, evs[i].events);
      }
    }
    if (w->dq_n) run_due(w, now_ns());
    flush_dirty(w);
    pthread_mutex_lock(&w->mu);
    if (w->snap_req) {
      w->snap = w->st;
      w->snap_req = 0;
      w->snap_done = 1;
      pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (g_stop) break;
  }
  return NULL;
}

// ---------------------------------------------------------------- reporting
static uint64_t t_start;
static double cpu_start;

static void snapshot(stats_t *tot) {
  memset(tot, 0, sizeof *tot);
  for (int i = 0; i < O.threads; i++) {
    worker *w = &W[i];
    pthread_mutex_lock(&w->mu);
    w->snap_req = 1;
    w->snap_done = 0;
    pthread_mutex_unlock(&w->mu);
    uint64_t one = 1;
    if (write(w->evfd, &one, sizeof one) < 0) { /* ignore */ }
    pthread_mutex_lock(&w->mu);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    while (!w->snap_done) {
      if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT) break;
    }
    merge_stats(tot, w->snap_done ? &w->snap : &w->st);  // fallback: racy read of a stuck thread
    pthread_mutex_unlock(&w->mu);
  }
}

static void json_line(char *out, size_t cap, const stats_t *s) {
  double el = (double)(now_ns() - t_start) / 1e9;
  const hist_t *h = &s->svc;
  snprintf(out, cap,
           "{\"tool\":\"apns-sink\",\"listen\":\"%s:%d\",\"threads\":%d,\"max_streams\":%u,\"delay_us\":%u"
           ",\"uptime_s\":%.2f,\"cpu_s\":%.2f"
           ",\"connections_opened\":%llu,\"connections_h2\":%llu,\"tls_failed\":%llu,\"connections_closed\":%llu"
           ",\"requests\":%llu,\"ok\":%llu,\"not_found\":%llu,\"bad_auth\":%llu,\"streams_reset\":%llu,\"dropped\":%llu"
           ",\"service_us\":{\"n\":%llu,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f,\"mean\":%.1f}}\n",
           inet_ntoa(O.addr.sin_addr), ntohs(O.addr.sin_port), O.threads, O.max_streams, O.delay_us, el,
           cpu_self_s() - cpu_start, (unsigned long long)s->conns_opened, (unsigned long long)s->conns_h2,
           (unsigned long long)s->tls_failed, (unsigned long long)s->conns_closed, (unsigned long long)s->requests,
           (unsigned long long)s->ok, (unsigned long long)s->not_found, (unsigned long long)s->bad_auth,
           (unsigned long long)s->streams_reset, (unsigned long long)s->dropped_late, (unsigned long long)h->n,
           hpct(h, 50) / 1e3, hpct(h, 90) / 1e3, hpct(h, 99) / 1e3, hpct(h, 99.9) / 1e3, h->max / 1e3,
           h->n ? (double)h->sum / (double)h->n / 1e3 : 0.0);
}

static void write_stats_file(const char *line) {
  if (!O.stats_file) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", O.stats_file, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) { fprintf(stderr, "apns-sink: cannot write %s: %s\n", tmp, strerror(errno)); return; }
  fputs(line, f);
  if (fclose(f) != 0 || rename(tmp, O.stats_file) != 0) {
    fprintf(stderr, "apns-sink: cannot write %s: %s\n", O.stats_file, strerror(errno));
    unlink(tmp);
  }
}

// ---------------------------------------------------------------- main
static void usage(void) {
  fprintf(stderr,
          "usage: apns-sink -l 127.0.0.1:PORT --cert CERT.pem --key KEY.pem [options]\n"
          "  -l HOST:PORT        listen address; HOST must be a 127.x.x.x address (or localhost); PORT 0 = any\n"
          "  --cert F --key F    PEM certificate (chain) and private key\n"
          "  -t N                event-loop threads sharing the port via SO_REUSEPORT (default 1)\n"
          "  --max-streams N     SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)\n"
          "  --delay-us N        answer N µs after the request's END_STREAM (default 0)\n"
          "  --stats-file F      also write the JSON line to F at exit and on every SIGUSR1\n"
          "Prints 'apns-sink: listening on 127.0.0.1:PORT' when ready; on SIGTERM/SIGINT prints one JSON\n"
          "line of statistics and exits 0.\n");
  exit(2);
}

static int make_listener(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (O.threads > 1) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in a = O.addr;
  a.sin_port = htons((uint16_t)port);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind %s:%d: %s", inet_ntoa(a.sin_addr), port, strerror(errno));
  if (listen(fd, 4096) < 0) die("listen: %s", strerror(errno));
  return fd;
}

int main(int argc, char **argv) {
  const char *listen_s = NULL;
  O.threads = 1;
  O.max_streams = 1000;
  static struct option lo[] = {{"cert", required_argument, 0, 1},        {"key", required_argument, 0, 2},
                               {"max-streams", required_argument, 0, 3}, {"delay-us", required_argument, 0, 4},
                               {"stats-file", required_argument, 0, 5},  {"listen", required_argument, 0, 'l'},
                               {"threads", required_argument, 0, 't'},   {"help", no_argument, 0, 'h'},
                               {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "l:t:h", lo, NULL)) != -1) {
    switch (ch) {
      case 'l': listen_s = optarg; break;
      case 't': O.threads = atoi(optarg); break;
      case 1: O.cert = optarg; break;
      case 2: O.key = optarg; break;
      case 3: O.max_streams = (uint32_t)strtoul(optarg, NULL, 10); break;
      case 4: O.delay_us = (uint32_t)strtoul(optarg, NULL, 10); break;
      case 5: O.stats_file = optarg; break;
      default: usage();
    }
  }
  if (optind != argc || !listen_s || !O.cert || !O.key) usage();
  if (O.threads < 1 || O.threads > MAX_THREADS) die("-t must be 1..%d", MAX_THREADS);
  if (O.max_streams < 1) die("--max-streams must be >= 1");
  O.delay_ns = (uint64_t)O.delay_us * 1000ull;

  char host[64];
  const char *colon = strrchr(listen_s, ':');
  if (!colon || colon - listen_s >= (long)sizeof host) die("-l must be HOST:PORT");
  memcpy(host, listen_s, (size_t)(colon - listen_s));
  host[colon - listen_s] = 0;
  if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
  O.addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, host, &O.addr.sin_addr) != 1) die("bad host %s (IPv4 literal expected)", host);
  if ((ntohl(O.addr.sin_addr.s_addr) >> 24) != 127) die("refusing non-loopback listen address %s", host);
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535) die("bad port %s", colon + 1);

  // TLS context (shared by all threads; SSL_CTX is thread-safe for SSL_new)
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) die("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, O.cert) != 1) {
    ERR_print_errors_fp(stderr);
    die("cannot load certificate %s", O.cert);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, O.key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_print_errors_fp(stderr);
    die("cannot load private key %s", O.key);
  }
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);

  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  nghttp2_session_callbacks_set_error_callback2(cbs, on_error);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  // No limit on incoming RST_STREAM. Debian's libnghttp2 1.52.0-1+deb12u1 and later ("rapid reset",
  // CVE-2023-44487) allow 1000 RST_STREAMs per connection, refilled at 33/s, then send
  // GOAWAY(INTERNAL_ERROR) while nghttp2_session_mem_recv still returns success. It counts every
  // RST_STREAM, including ones for streams that are already closed. libcurl 7.88.x sends
  // RST_STREAM(STREAM_CLOSED) after *every* completed stream (the response had END_STREAM), so at
  // benchmark rates each connection from the relay died after about 1000 requests
  // (last_stream_id ~2001). This sink only listens on loopback for our own load tools, so it
  // does not need the protection.
  nghttp2_option_set_stream_reset_rate_limit(opt, UINT64_MAX, UINT64_MAX);

  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);

  // Signals: blocked everywhere, taken synchronously by the main thread.
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, SIGTERM);
  sigaddset(&ss, SIGINT);
  sigaddset(&ss, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &ss, NULL);
  signal(SIGPIPE, SIG_IGN);

  int real_port = (int)port;
  for (int i = 0; i < O.threads; i++) {
    worker *w = &W[i];
    w->idx = i;
    w->ctx = ctx;
    w->cbs = cbs;
    w->opt = opt;
    w->lfd = make_listener(real_port);
    if (real_port == 0) {
      struct sockaddr_in a;
      socklen_t al = sizeof a;
      getsockname(w->lfd, (struct sockaddr *)&a, &al);
      real_port = ntohs(a.sin_port);
    }
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epfd < 0 || w->evfd < 0) die("epoll/eventfd: %s", strerror(errno));
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &w->lfd};
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &e);
    e.data.ptr = &w->evfd;
    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &e);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
  }
  O.addr.sin_port = htons((uint16_t)real_port);
  t_start = now_ns();
  cpu_start = cpu_self_s();
  for (int i = 0; i < O.threads; i++)
    if (pthread_create(&W[i].th, NULL, worker_main, &W[i]) != 0) die("pthread_create");
  printf("apns-sink: listening on %s:%d\n", inet_ntoa(O.addr.sin_addr), real_port);
  fflush(stdout);

  static stats_t tot;
  static char line[2048];
  for (;;) {
    int sig = sigwaitinfo(&ss, NULL);
    if (sig < 0) continue;
    if (sig == SIGUSR1) {
      if (!O.stats_file) continue;
      snapshot(&tot);
      json_line(line, sizeof line, &tot);
      write_stats_file(line);
      continue;
    }
    break;  // SIGTERM / SIGINT
  }
  g_stop = 1;
  for (int i = 0; i < O.threads; i++) {
    uint64_t one = 1;
    if (write(W[i].evfd, &one, sizeof one) < 0) { /* ignore */ }
  }
  for (int i = 0; i < O.threads; i++) pthread_join(W[i].th, NULL);
  memset(&tot, 0, sizeof tot);
  for (int i = 0; i < O.threads; i++) merge_stats(&tot, &W[i].st);
  json_line(line, sizeof line, &tot);
  fputs(line, stdout);
  fflush(stdout);
  write_stats_file(line);
  return 0;
}
