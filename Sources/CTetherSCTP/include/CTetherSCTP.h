#ifndef CTETHERSCTP_H
#define CTETHERSCTP_H
// usrsctp (Debian's libusrsctp-dev): SCTP in user space over AF_CONN, so the packets go to DTLS
// instead of a socket. Its callbacks are C function pointers and some options are structs with
// unions, so those calls are wrapped here.
#include <usrsctp.h>

/// SCTP_DATA_CHANNEL payload protocol identifiers (RFC 8831 §8): DCEP and the message kinds.
enum {
    TETHER_PPID_DCEP = 50,
    TETHER_PPID_STRING = 51,
    TETHER_PPID_BINARY = 53,
    TETHER_PPID_STRING_EMPTY = 56,
    TETHER_PPID_BINARY_EMPTY = 57,
};
#endif
