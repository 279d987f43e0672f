#ifndef TETHER_CTETHERSYSTEM_H
#define TETHER_CTETHERSYSTEM_H
// Thin wrappers over Linux calls whose headers Glibc's Swift overlay does not
// import cleanly (packed structs, variadic calls, function-like macros).
// Each returns what the system call returns; errno is left for the caller.
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <pthread.h>

// epoll: Swift cannot read `struct epoll_event` reliably because it is packed on x86_64.
typedef struct {
    uint32_t events;
    uint64_t data;
} tether_epoll_event;

enum {
    TETHER_EPOLLIN = 0x001,
    TETHER_EPOLLPRI = 0x002,
    TETHER_EPOLLOUT = 0x004,
    TETHER_EPOLLERR = 0x008,
    TETHER_EPOLLHUP = 0x010,
    TETHER_EPOLLRDHUP = 0x2000,
    TETHER_EPOLLET = (int)(1u << 31),
};

int tether_epoll_create(void);
int tether_epoll_add(int epfd, int fd, uint32_t events, uint64_t data);
int tether_epoll_modify(int epfd, int fd, uint32_t events, uint64_t data);
int tether_epoll_remove(int epfd, int fd);
/// Waits for up to `capacity` events; returns their count, 0 on timeout, -1 on error.
int tether_epoll_wait(int epfd, tether_epoll_event *events, int capacity, int timeout_ms);

/// A non-blocking, close-on-exec eventfd used to wake an event loop from another thread.
int tether_eventfd_create(void);
int tether_eventfd_signal(int fd);
/// Reads and clears the counter; returns 0 when it was already clear.
int tether_eventfd_drain(int fd, uint64_t *value);

/// A non-blocking, close-on-exec CLOCK_MONOTONIC timerfd.
int tether_timerfd_create(void);
/// Arms a one-shot timer `nanoseconds` from now (0 disarms).
int tether_timerfd_arm(int fd, uint64_t nanoseconds);
/// Reads the expiration count; returns 0 when the timer has not fired.
int tether_timerfd_drain(int fd, uint64_t *expirations);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
int tether_accept(int fd, struct sockaddr *addr, socklen_t *len);
/// A non-blocking, close-on-exec socket.
int tether_socket(int domain, int type);
int tether_set_int_option(int fd, int level, int name, int value);
int tether_get_int_option(int fd, int level, int name, int *value);
int tether_set_reuse_port(int fd);
int tether_set_nodelay(int fd);
int tether_set_ipv6_only(int fd, int only);
/// The pending socket error (SO_ERROR) of a non-blocking connect; -1 if it cannot be read.
int tether_socket_error(int fd);
/// send() without SIGPIPE.
ssize_t tether_send(int fd, const void *buf, size_t len);


/// CPUs this process may run on (its affinity mask: taskset, cpusets), at least 1; the online
/// count if the mask cannot be read.
int tether_usable_cpus(void);

/// Sets the calling thread's nice value (Linux schedules threads one by one, so this touches no
/// other thread). Returns 0 or -1.
int tether_set_thread_nice(int nice);

/// Names the calling thread (what `top -H` and /proc/PID/task/*/comm show); Linux keeps the
/// first 15 bytes. Returns 0 or an error number.
int tether_set_thread_name(const char *name);

/// Sends each of `signals` that reaches a thread not blocking it on to `thread` (the signal
/// watcher, which blocks them and takes them with sigwait): threads that existed before the
/// mask was set — the Swift runtime's, in an async `main` — would otherwise die of SIGTERM.
/// The handler only calls pthread_kill, which is async-signal-safe. Returns 0 or an errno.
int tether_forward_signals(pthread_t thread, const int *signals, int count);
/// Stops forwarding (the watcher is gone): a forwarded signal is then dropped.
void tether_forward_signals_stop(void);

/// Flushes stdout and stderr only: fflush(NULL) also takes the lock of stdin, which a thread
/// blocked reading a line holds for as long as it waits.
void tether_flush_standard_output(void);

/// ThreadSanitizer's happens-before annotations, defined by its runtime. Only a build with
/// TETHER_TSAN defined (make check-tsan) calls them, so no other build needs the symbols.
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif
