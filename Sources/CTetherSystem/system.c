#define _GNU_SOURCE
#include <stdio.h>
#include "CTetherSystem.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

int tether_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int epoll_control(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

int tether_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) {
    return epoll_control(epfd, EPOLL_CTL_ADD, fd, events, data);
}

int tether_epoll_modify(int epfd, int fd, uint32_t events, uint64_t data) {
    return epoll_control(epfd, EPOLL_CTL_MOD, fd, events, data);
}

int tether_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int tether_epoll_wait(int epfd, tether_epoll_event *events, int capacity, int timeout_ms) {
    enum { batch = 256 };
    struct epoll_event raw[batch];
    if (capacity > batch) capacity = batch;
    int n = epoll_wait(epfd, raw, capacity, timeout_ms);
    for (int i = 0; i < n; i++) {
        events[i].events = raw[i].events;
        events[i].data = raw[i].data.u64;
    }
    return n;
}

int tether_eventfd_create(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int tether_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    if (n == (ssize_t)sizeof one) return 0;
    // EAGAIN means the counter is saturated: the loop is already due to wake.
    return (n < 0 && errno == EAGAIN) ? 0 : -1;
}

int tether_eventfd_drain(int fd, uint64_t *value) {
    ssize_t n = read(fd, value, sizeof *value);
    if (n == (ssize_t)sizeof *value) return 1;
    if (n < 0 && errno == EAGAIN) { *value = 0; return 0; }
    return -1;
}

int tether_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int tether_timerfd_arm(int fd, uint64_t nanoseconds) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_value.tv_sec = (time_t)(nanoseconds / 1000000000ull);
    spec.it_value.tv_nsec = (long)(nanoseconds % 1000000000ull);
    return timerfd_settime(fd, 0, &spec, NULL);
}

int tether_timerfd_drain(int fd, uint64_t *expirations) {
    ssize_t n = read(fd, expirations, sizeof *expirations);
    if (n == (ssize_t)sizeof *expirations) return 1;
    if (n < 0 && errno == EAGAIN) { *expirations = 0; return 0; }
    return -1;
}

int tether_accept(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int tether_socket(int domain, int type) { return socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

int tether_set_int_option(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

int tether_get_int_option(int fd, int level, int name, int *value) {
    socklen_t len = sizeof *value;
    return getsockopt(fd, level, name, value, &len);
}

int tether_set_reuse_port(int fd) { return tether_set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1); }
int tether_set_nodelay(int fd) { return tether_set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1); }
int tether_set_ipv6_only(int fd, int only) { return tether_set_int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, only); }

int tether_socket_error(int fd) {
    int err = 0;
    return tether_get_int_option(fd, SOL_SOCKET, SO_ERROR, &err) == 0 ? err : -1;
}

ssize_t tether_send(int fd, const void *buf, size_t len) { return send(fd, buf, len, MSG_NOSIGNAL); }

#include <signal.h>

int tether_usable_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int count = CPU_COUNT(&set);
        if (count > 0) return count;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

int tether_set_thread_nice(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

int tether_set_thread_name(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    return pthread_setname_np(pthread_self(), truncated);
}

static pthread_t tether_signal_target;
static volatile sig_atomic_t tether_signal_target_set = 0;

static void tether_forward_signal(int signal) {
    int saved = errno;
    if (tether_signal_target_set) pthread_kill(tether_signal_target, signal);
    errno = saved;
}

void tether_forward_signals_stop(void) { tether_signal_target_set = 0; }

void tether_flush_standard_output(void) {
    fflush(stdout);
    fflush(stderr);
}

int tether_forward_signals(pthread_t thread, const int *signals, int count) {
    tether_signal_target_set = 0;
    tether_signal_target = thread;
    tether_signal_target_set = 1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = tether_forward_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < count; i++) {
        if (sigaction(signals[i], &action, NULL) != 0) return errno;
    }
    return 0;
}
