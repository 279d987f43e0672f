import CTetherSCTP
import Glibc

extension DataChannelAssociation {
    /// On the queue: queues a message behind the others and hands what fits to SCTP.
    func enqueue(_ message: OutgoingMessage) {
        shared.withLock {
            $0.outbox.append(message)
            $0.outboxBytes += message.payload.count
        }
        flushOutbox()
    }

    /// On the queue: hands the outbox to SCTP, oldest first, until it is empty or the send
    /// buffer is full (usrsctp's send callback calls this again when there is room).
    func flushOutbox() {
        guard let socket else { return }
        while let next = shared.withLock({ $0.outbox.first }) {
            let sent = next.payload.withUnsafeBytes {
                tether_sctp_send(socket, $0.baseAddress, $0.count, next.stream, next.ppid.rawValue)
            }
            if sent < 0 {
                let error = Int32(-sent)
                if error == EWOULDBLOCK || error == EAGAIN { return }
                fail(.sendRefused(errno: error))
                return
            }
            shared.withLock {
                $0.outbox.removeFirst()
                $0.outboxBytes -= next.payload.count
            }
        }
        if phase == .closing, !closeResetRequested, let stream = channelStream {
            closeResetRequested = true
            requestReset(stream)
        }
    }

    /// On the queue: the local half of `closeChannel`.
    func beginChannelClose() {
        guard socket != nil else { return }
        let wasOpen = shared.withLock { shared -> Bool in
            switch shared.phase {
            case .open:
                shared.phase = .closing
                return true
            case .connecting, .awaitingOpen:
                shared.phase = .closed
                return false
            case .closing, .closed, .failed:
                return false
            }
        }
        if wasOpen { flushOutbox() }
    }

    /// Resets the outgoing direction of `stream`, now or, while another reset is outstanding,
    /// after it.
    func requestReset(_ stream: UInt16) {
        pendingResets.append(stream)
        flushResets()
    }

    func flushResets() {
        guard let socket else { return }
        while let stream = pendingResets.first {
            let result = tether_sctp_reset_outgoing(socket, stream)
            let error = -result
            // usrsctp takes one reset request at a time; the next reset notification retries.
            if result < 0, error == EALREADY || error == EBUSY || error == EAGAIN || error == EINPROGRESS { return }
            pendingResets.removeFirst()
        }
    }
}
