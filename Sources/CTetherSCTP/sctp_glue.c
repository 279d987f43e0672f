#define _GNU_SOURCE
#include "CTetherSCTP.h"
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tether_sctp_output_fn output_fn;
static tether_sctp_data_fn data_fn;
static tether_sctp_notice_fn notice_fn;
static tether_sctp_writable_fn writable_fn;
static pthread_once_t started = PTHREAD_ONCE_INIT;

// usrsctp is entered by one thread at a time: every call into it below, the timer tick
// included, holds this lock. Its own locking does not survive concurrent entry from several
// threads: open usrsctp issues #673 and #676 (a use-after-free in sctp_timeout_handler when
// the timer runs beside usrsctp_conninput) and #697 (conninput racing another call on the
// socket), all with each association's thread and the timer thread entering at will, as
// here before this lock. The callbacks run with the lock held and only copy and hop to a
// queue, never calling back into usrsctp, so one plain mutex cannot deadlock. The cost is SCTP work of different calls no longer running in
// parallel, which a client with one or two calls never notices.
static pthread_mutex_t stack_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCKED(...) do { pthread_mutex_lock(&stack_lock); __VA_ARGS__; pthread_mutex_unlock(&stack_lock); } while (0)

// The CRC32c of RFC 9260 Appendix A. Debian builds usrsctp without optimisation, and its
// table-driven CRC then took a tenth of a call's CPU at full rate (perf, tether-rtcbench): the
// CPU's own crc32 instruction (SSE4.2) does the same in a fraction of a cycle per byte, and
// where the CPU has none usrsctp's function is used. The result is the value to store in the
// common header as it is (usrsctp_crc32c's convention; the unit tests compare the two).
#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(const unsigned char *bytes, size_t length) {
    uint64_t crc = 0xFFFFFFFFu;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8);
        crc = __builtin_ia32_crc32di(crc, word);
        bytes += 8;
        length -= 8;
    }
    uint32_t crc32 = (uint32_t)crc;
    while (length > 0) {
        crc32 = __builtin_ia32_crc32qi(crc32, *bytes);
        bytes++;
        length--;
    }
    return ~crc32;
}
#endif

uint32_t tether_sctp_checksum(const void *packet, size_t length) {
#if defined(__x86_64__)
    // A read of the CPU model libgcc/compiler-rt filled in at start-up.
    if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42(packet, length);
#endif
    return usrsctp_crc32c((void *)packet, length);
}

uint32_t tether_sctp_reference_checksum(const void *packet, size_t length) {
    return usrsctp_crc32c((void *)packet, length);
}

// usrsctp runs with its checksum "offloaded" (start_once): it neither computes the checksum of
// what it sends nor checks what it receives. Sending, the checksum is filled in here, since the
// peer checks it (RFC 9260 §6.8; RFC 9653's zero checksum is not negotiated). Receiving, DTLS
// has already authenticated every byte of the packet, which a CRC cannot add to.
static int conn_output(void *addr, void *buffer, size_t length, uint8_t tos, uint8_t set_df) {
    (void)tos;
    (void)set_df;
    if (length >= 12) {
        unsigned char *header = buffer;
        memset(header + 8, 0, 4);
        uint32_t checksum = tether_sctp_checksum(buffer, length);
        memcpy(header + 8, &checksum, 4);
    }
    output_fn((tether_sctp_id)addr, buffer, length);
    return 0;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

// usrsctp's own timer thread does the same: a 10 ms tick. It lives as long as the process,
// because usrsctp_finish is only safe once every socket of every association is gone.
static void *timer_loop(void *unused) {
    (void)unused;
    uint64_t last = now_ms();
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (;;) {
        nanosleep(&tick, NULL);
        uint64_t now = now_ms();
        LOCKED(usrsctp_handle_timers((uint32_t)(now - last)));
        last = now;
    }
    return NULL;
}

static void start_once(void) {
    // usrsctp_init would also open raw IPv4 and IPv6 SCTP sockets (when the process may, as root
    // does) and feed every SCTP packet reaching the host into the stack on two more threads; an
    // AF_CONN-only stack needs none of that, so the no-threads variant plus our own clock.
    usrsctp_init_nothreads(0, conn_output, NULL);
    // No IP header to carry ECN bits inside DTLS; ASCONF and AUTH serve nothing over one
    // AF_CONN address, so they are off to keep the attack surface small (as browsers do).
    usrsctp_sysctl_set_sctp_ecn_enable(0);
    usrsctp_sysctl_set_sctp_asconf_enable(0);
    usrsctp_sysctl_set_sctp_auth_enable(0);
    usrsctp_enable_crc32c_offload();
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, timer_loop, NULL) != 0) abort();
    pthread_attr_destroy(&attr);
    pthread_setname_np(thread, "sctp-timer");
}

void tether_sctp_start(tether_sctp_output_fn output, tether_sctp_data_fn data,
                       tether_sctp_notice_fn notice, tether_sctp_writable_fn writable) {
    if (output_fn == NULL) {
        output_fn = output;
        data_fn = data;
        notice_fn = notice;
        writable_fn = writable;
    }
    pthread_once(&started, start_once);
}

static void deliver_notice(tether_sctp_id id, const union sctp_notification *n, size_t length) {
    if (length < sizeof(n->sn_header) || n->sn_header.sn_length > length) return;
    struct tether_sctp_notice notice = {0};
    notice.type = n->sn_header.sn_type;
    notice.flags = n->sn_header.sn_flags;
    switch (n->sn_header.sn_type) {
    case SCTP_ASSOC_CHANGE:
        if (length < sizeof(struct sctp_assoc_change)) return;
        notice.state = n->sn_assoc_change.sac_state;
        notice.error = n->sn_assoc_change.sac_error;
        break;
    case SCTP_STREAM_RESET_EVENT:
        if (length < sizeof(struct sctp_stream_reset_event)) return;
        if (n->sn_strreset_event.strreset_length < sizeof(struct sctp_stream_reset_event) ||
            n->sn_strreset_event.strreset_length > length) return;
        notice.stream_count = (uint16_t)((n->sn_strreset_event.strreset_length - sizeof(struct sctp_stream_reset_event)) / sizeof(uint16_t));
        notice.streams = n->sn_strreset_event.strreset_stream_list;
        break;
    case SCTP_SEND_FAILED_EVENT:
        if (length < sizeof(struct sctp_send_failed_event)) return;
        notice.failure = n->sn_send_failed_event.ssfe_error;
        notice.stream = n->sn_send_failed_event.ssfe_info.snd_sid;
        break;
    case SCTP_PARTIAL_DELIVERY_EVENT:
        if (length < sizeof(struct sctp_pdapi_event)) return;
        notice.failure = n->sn_pdapi_event.pdapi_indication;
        notice.stream = n->sn_pdapi_event.pdapi_stream;
        break;
    default:
        break;
    }
    notice_fn(id, &notice);
}

// With the callback API usrsctp hands over a malloc'd buffer that the callback must free.
static int receive(struct socket *sock, union sctp_sockstore addr, void *data, size_t length,
                   struct sctp_rcvinfo info, int flags, void *ulp_info) {
    (void)sock;
    (void)addr;
    tether_sctp_id id = (tether_sctp_id)ulp_info;
    if (data == NULL) {
        data_fn(id, NULL, 0, 0, 0, 0);
        return 1;
    }
    if (flags & MSG_NOTIFICATION) {
        deliver_notice(id, data, length);
    } else {
        data_fn(id, data, length, info.rcv_sid, ntohl(info.rcv_ppid), flags);
    }
    free(data);
    return 1;
}

static int send_ready(struct socket *sock, uint32_t free_space, void *ulp_info) {
    (void)sock;
    (void)free_space;
    writable_fn((tether_sctp_id)ulp_info);
    return 0;
}

struct socket *tether_sctp_open(tether_sctp_id id, uint32_t send_threshold) {
    struct socket *so = NULL;
    int error = 0;
    LOCKED({
        usrsctp_register_address((void *)id);
        so = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, receive, send_ready, send_threshold, (void *)id);
        error = errno;
        if (so == NULL) usrsctp_deregister_address((void *)id);
    });
    errno = error;
    return so;
}

void tether_sctp_close(struct socket *so, tether_sctp_id id) {
    LOCKED({
        usrsctp_close(so);
        usrsctp_deregister_address((void *)id);
    });
}

void tether_sctp_input(tether_sctp_id id, const void *packet, size_t length) {
    LOCKED(usrsctp_conninput((void *)id, packet, length, 0));
}

static int configure(struct socket *so, uint32_t buffer_size, uint32_t partial_delivery_point,
                          uint32_t rto_initial_ms, uint32_t rto_min_ms, uint32_t rto_max_ms) {
    if (usrsctp_set_non_blocking(so, 1) < 0) return -1;
    int buffer = (int)buffer_size;
    if (usrsctp_setsockopt(so, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer)) < 0) return SO_SNDBUF;
    if (usrsctp_setsockopt(so, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer)) < 0) return SO_RCVBUF;
    // close() aborts rather than lingering in a graceful shutdown nobody waits for.
    struct linger linger = {.l_onoff = 1, .l_linger = 0};
    if (usrsctp_setsockopt(so, SOL_SOCKET, SO_LINGER, &linger, sizeof(linger)) < 0) return SO_LINGER;
    int on = 1;
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_NODELAY, &on, sizeof(on)) < 0) return SCTP_NODELAY;
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_RECVRCVINFO, &on, sizeof(on)) < 0) return SCTP_RECVRCVINFO;
    struct sctp_assoc_value reset = {.assoc_id = SCTP_ALL_ASSOC, .assoc_value = SCTP_ENABLE_RESET_STREAM_REQ};
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_ENABLE_STREAM_RESET, &reset, sizeof(reset)) < 0) return SCTP_ENABLE_STREAM_RESET;
    uint32_t point = partial_delivery_point;
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_PARTIAL_DELIVERY_POINT, &point, sizeof(point)) < 0) return SCTP_PARTIAL_DELIVERY_POINT;
    struct sctp_rtoinfo rto = {.srto_assoc_id = SCTP_FUTURE_ASSOC, .srto_initial = rto_initial_ms,
                               .srto_max = rto_max_ms, .srto_min = rto_min_ms};
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_RTOINFO, &rto, sizeof(rto)) < 0) return SCTP_RTOINFO;
    const uint16_t events[] = {SCTP_ASSOC_CHANGE, SCTP_STREAM_RESET_EVENT, SCTP_SEND_FAILED_EVENT,
                               SCTP_PARTIAL_DELIVERY_EVENT, SCTP_SHUTDOWN_EVENT};
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
        struct sctp_event event = {.se_assoc_id = SCTP_ALL_ASSOC, .se_type = events[i], .se_on = 1};
        if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_EVENT, &event, sizeof(event)) < 0) return SCTP_EVENT;
    }
    return 0;
}

static struct sockaddr_conn conn_address(tether_sctp_id id, uint16_t port) {
    struct sockaddr_conn address;
    memset(&address, 0, sizeof(address));
    address.sconn_family = AF_CONN;
    address.sconn_port = htons(port);
    address.sconn_addr = (void *)id;
    return address;
}

static int connect_association(struct socket *so, tether_sctp_id id, uint16_t local_port,
                               uint16_t remote_port, uint32_t path_mtu) {
    struct sockaddr_conn local = conn_address(id, local_port);
    if (usrsctp_bind(so, (struct sockaddr *)&local, sizeof(local)) < 0) return -errno;
    // Both ends connect (as browsers do); SCTP resolves the INIT collision (RFC 9260 §5.2.1).
    struct sockaddr_conn remote = conn_address(id, remote_port);
    if (usrsctp_connect(so, (struct sockaddr *)&remote, sizeof(remote)) < 0 && errno != EINPROGRESS) return -errno;
    struct sctp_paddrparams params;
    memset(&params, 0, sizeof(params));
    memcpy(&params.spp_address, &remote, sizeof(remote));
    params.spp_flags = SPP_PMTUD_DISABLE;
    // usrsctp adds the common header to an AF_CONN path MTU (it takes it for the IP overhead).
    params.spp_pathmtu = path_mtu - (uint32_t)sizeof(struct sctp_common_header);
    if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, &params, sizeof(params)) < 0) return -errno;
    return 0;
}

long tether_sctp_send(struct socket *so, const void *data, size_t length, uint16_t stream, uint32_t ppid) {
    struct sctp_sndinfo info;
    memset(&info, 0, sizeof(info));
    info.snd_sid = stream;
    info.snd_ppid = htonl(ppid);
    info.snd_flags = SCTP_EOR;
    ssize_t sent;
    int error = 0;
    LOCKED({
        sent = usrsctp_sendv(so, data, length, NULL, 0, &info, sizeof(info), SCTP_SENDV_SNDINFO, 0);
        error = errno;
    });
    return sent < 0 ? -error : (long)sent;
}

int tether_sctp_reset_outgoing(struct socket *so, uint16_t stream) {
    size_t size = sizeof(struct sctp_reset_streams) + sizeof(uint16_t);
    struct sctp_reset_streams *reset = calloc(1, size);
    if (reset == NULL) return -ENOMEM;
    reset->srs_assoc_id = SCTP_ALL_ASSOC;
    reset->srs_flags = SCTP_STREAM_RESET_OUTGOING;
    reset->srs_number_streams = 1;
    reset->srs_stream_list[0] = stream;
    int result, error = 0;
    LOCKED({
        result = usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_RESET_STREAMS, reset, (socklen_t)size);
        error = errno;
    });
    free(reset);
    return result < 0 ? -error : 0;
}

int tether_sctp_configure(struct socket *so, uint32_t buffer_size, uint32_t partial_delivery_point,
                          uint32_t rto_initial_ms, uint32_t rto_min_ms, uint32_t rto_max_ms) {
    int result, error = 0;
    LOCKED({
        result = configure(so, buffer_size, partial_delivery_point, rto_initial_ms, rto_min_ms, rto_max_ms);
        error = errno;
    });
    errno = error;
    return result;
}

int tether_sctp_connect(struct socket *so, tether_sctp_id id, uint16_t local_port,
                        uint16_t remote_port, uint32_t path_mtu) {
    int result;
    LOCKED(result = connect_association(so, id, local_port, remote_port, path_mtu));
    return result;
}
