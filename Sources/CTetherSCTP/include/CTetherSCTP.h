#ifndef CTETHERSCTP_H
#define CTETHERSCTP_H
// usrsctp (Debian's libusrsctp-dev): SCTP in user space over AF_CONN, so the packets go to DTLS
// instead of a socket. Its callbacks are C function pointers and some options are structs with
// unions, so those calls are wrapped here.
#include <usrsctp.h>
#include <stdint.h>

/// SCTP_DATA_CHANNEL payload protocol identifiers (RFC 8831 §8): DCEP and the message kinds.
enum {
    TETHER_PPID_DCEP = 50,
    TETHER_PPID_STRING = 51,
    TETHER_PPID_BINARY = 53,
    TETHER_PPID_STRING_EMPTY = 56,
    TETHER_PPID_BINARY_EMPTY = 57,
};

/// An association is named to usrsctp by a number, never by a pointer to a Swift object: the
/// AF_CONN address (`sconn_addr`) and the socket's ulp_info are that number, so a callback that
/// races a close finds nothing in the registry instead of freed memory.
typedef uintptr_t tether_sctp_id;

/// A notification, flattened (the C structs are a union of flexible-array structs).
struct tether_sctp_notice {
    uint16_t type;          // SCTP_ASSOC_CHANGE, SCTP_STREAM_RESET_EVENT, ...
    uint16_t flags;         // strreset_flags, ssfe_flags, ...
    uint16_t state;         // sac_state (SCTP_ASSOC_CHANGE)
    uint16_t error;         // sac_error
    uint32_t failure;       // ssfe_error (SCTP_SEND_FAILED_EVENT), pdapi_indication
    uint32_t stream;        // ssfe_info.snd_sid, pdapi_stream
    uint16_t stream_count;  // strreset_stream_list's length
    const uint16_t *streams;
};

/// Outbound packet: valid only during the call. Called on usrsctp's timer thread or on the
/// thread inside a usrsctp call, with usrsctp's locks held: it must copy and return.
typedef void (*tether_sctp_output_fn)(tether_sctp_id id, const void *packet, size_t length);
/// A message or a piece of one (no MSG_EOR in flags), the ppid in host order; data NULL means
/// the socket was shut down. Same thread rules as output.
typedef void (*tether_sctp_data_fn)(tether_sctp_id id, const void *data, size_t length,
                                    uint16_t stream, uint32_t ppid, int flags);
typedef void (*tether_sctp_notice_fn)(tether_sctp_id id, const struct tether_sctp_notice *notice);
/// The send buffer has room again.
typedef void (*tether_sctp_writable_fn)(tether_sctp_id id);

/// The process-wide bring-up, once (later calls do nothing): usrsctp without its raw IPv4/IPv6
/// sockets and their threads, and one timer thread of ours that drives usrsctp's clock.
/// The CRC32c an SCTP common header carries for `packet` (its checksum field zero), ready to
/// store as it is; `tether_sctp_reference_checksum` is usrsctp's own, for the tests.
uint32_t tether_sctp_checksum(const void *packet, size_t length);
uint32_t tether_sctp_reference_checksum(const void *packet, size_t length);

void tether_sctp_start(tether_sctp_output_fn output, tether_sctp_data_fn data,
                       tether_sctp_notice_fn notice, tether_sctp_writable_fn writable);

/// Every function below enters usrsctp under one process-wide lock (see sctp_glue.c for why),
/// and usrsctp is never called but through them.

/// Registers `id` as an AF_CONN address and makes a one-to-one socket on it delivering to the
/// callbacks above under `id`. NULL with errno (and the address deregistered).
struct socket *tether_sctp_open(tether_sctp_id id, uint32_t send_threshold);

/// Closes the socket (aborting the association under SO_LINGER 0) and deregisters `id`.
void tether_sctp_close(struct socket *so, tether_sctp_id id);

/// One SCTP packet from the peer (DTLS's decrypted application data) for address `id`.
void tether_sctp_input(tether_sctp_id id, const void *packet, size_t length);

/// The data channel's socket options (RFC 8831 §6): non-blocking, no Nagle, stream reset,
/// abort on close, the notifications it handles, the buffers and the partial delivery point.
/// 0, or the option that failed (and errno).
int tether_sctp_configure(struct socket *so, uint32_t buffer_size, uint32_t partial_delivery_point,
                          uint32_t rto_initial_ms, uint32_t rto_min_ms, uint32_t rto_max_ms);

/// Binds to local_port and connects to remote_port, both on the AF_CONN address `id`; then fixes
/// the path MTU, the largest SCTP packet (there is no path MTU discovery inside DTLS). 0 or -errno.
int tether_sctp_connect(struct socket *so, tether_sctp_id id, uint16_t local_port,
                        uint16_t remote_port, uint32_t path_mtu);

/// One whole, ordered, reliable message (no explicit EOR). The length sent, or -errno.
long tether_sctp_send(struct socket *so, const void *data, size_t length, uint16_t stream, uint32_t ppid);

/// Resets the outgoing direction of one stream (RFC 6525), how a data channel closes. 0 or -errno.
int tether_sctp_reset_outgoing(struct socket *so, uint16_t stream);
#endif
