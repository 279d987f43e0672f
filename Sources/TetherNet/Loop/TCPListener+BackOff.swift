import CTetherSystem
import Glibc

extension TCPListener {
    /// The first pause: long enough that a descriptor-starved process stays idle, short enough
    /// that service resumes promptly once a few connections close.
    static let initialBackOff: Duration = .milliseconds(100)
    /// The longest pause: a server that stays exhausted still retries every second.
    static let maximumBackOff: Duration = .seconds(1)

    enum AcceptFailure: Equatable {
        /// Nothing is pending (EAGAIN): wait for epoll.
        case drained
        /// That one connection failed before or while it was accepted (accept(2) passes on a
        /// pending network error of the new socket, and EINTR interrupts only this call): the
        /// next in the backlog may be fine.
        case connectionFailed
        /// The process or system is out of descriptors or memory, or the listener itself is
        /// broken: retrying now would fail again.
        case exhausted
    }

    static func classify(_ code: Int32) -> AcceptFailure {
        switch code {
        case EAGAIN, EWOULDBLOCK: .drained
        case ECONNABORTED, EINTR, EPROTO, EPERM, ENETDOWN, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH, EOPNOTSUPP,
             ENETUNREACH, ETIMEDOUT:
            .connectionFailed
        default: .exhausted
        }
    }

    /// Stops watching the socket (epoll interest off: the backlog holds the waiting clients)
    /// and watches it again after the current back-off, doubling the next one.
    func backOff() {
        backOffs.increment()
        let delay = nextBackOff
        nextBackOff = min(nextBackOff * 2, Self.maximumBackOff)
        loop.modify(fd: fd, token: token, events: 0)
        backOffTimer = loop.schedule(after: delay) { [weak self] in self?.resumeAccepting() }
    }

    private func resumeAccepting() {
        backOffTimer = nil
        guard !isClosed else { return }
        // Level-triggered: a backlog still waiting is reported by the next epoll_wait.
        loop.modify(fd: fd, token: token, events: UInt32(TETHER_EPOLLIN))
    }
}
