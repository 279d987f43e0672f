import CTetherSystem
import Glibc

/// A non-blocking TCP connection confined to one event loop.
///
/// Reads go through the loop's shared buffer, so an idle connection holds no read buffer.
/// Writes are attempted at once; what the kernel does not take is queued (as the caller's own
/// arrays, no copy) and flushed with `writev`. When the queue passes `highWaterMark`,
/// `isWritable` turns false until it drains below `lowWaterMark` — the back-pressure signal a
/// splice uses to pause the other leg.
public final class TCPConnection: EventLoopHandler, Transport {
    public private(set) var loop: EventLoop
    public let peer: SocketAddress?
    public var delegate: (any TransportDelegate)?
    public var highWaterMark = 256 * 1024
    public var lowWaterMark = 64 * 1024

    public private(set) var isWritable = true
    public private(set) var isClosed = false
    public private(set) var isReadingPaused = false

    let fd: Int32
    private var token: UInt64 = 0
    private var queue: [[UInt8]] = []
    private var queueHead = 0
    private var headOffset = 0
    public private(set) var queuedBytes = 0
    private var closeWhenFlushed = false
    /// Bumped by `handoff` on the old loop, so a read loop in progress stops touching the socket.
    private var handoffEpoch = 0
    private var wantsWrite = false

    /// Adopts a connected, non-blocking socket on `loop` (call on that loop's thread).
    public init(fd: Int32, loop: EventLoop, peer: SocketAddress?) throws {
        self.fd = fd
        self.loop = loop
        self.peer = peer
        _ = tether_set_nodelay(fd)
        token = try loop.register(fd: fd, events: interest, handler: self)
    }

    private var interest: UInt32 {
        var events = UInt32(TETHER_EPOLLRDHUP)
        if !isReadingPaused { events |= UInt32(TETHER_EPOLLIN) }
        if wantsWrite { events |= UInt32(TETHER_EPOLLOUT) }
        return events
    }

    private func updateInterest() {
        guard !isClosed else { return }
        loop.modify(fd: fd, token: token, events: interest)
    }

    // MARK: Reading

    public func readable() {
        // A few reads per wake-up keep one busy peer from starving the others on this loop.
        let epoch = handoffEpoch
        for _ in 0..<4 {
            guard !isClosed, !isReadingPaused, handoffEpoch == epoch else { return }
            let buffer = loop.readBuffer
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n > 0 {
                delegate?.transport(self, didRead: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                if n < buffer.count { return }
            } else if n == 0 {
                close(error: nil)
                return
            } else {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                close(error: .system("read", errno))
                return
            }
        }
    }

    public func pauseReading() {
        guard !isReadingPaused else { return }
        isReadingPaused = true
        updateInterest()
    }

    public func resumeReading() {
        guard isReadingPaused else { return }
        isReadingPaused = false
        updateInterest()
    }

    // MARK: Writing

    /// Queues `bytes` for sending (the array is kept, not copied, if it must wait).
    public func write(_ bytes: [UInt8]) {
        guard !isClosed, !bytes.isEmpty else { return }
        if queuedBytes == 0 {
            let n = bytes.withUnsafeBytes { tether_send(fd, $0.baseAddress, $0.count) }
            if n == bytes.count { return }
            if n < 0, errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
                close(error: .system("send", errno))
                return
            }
            let sent = max(0, n)
            enqueue(bytes, offset: sent)
        } else {
            enqueue(bytes, offset: 0)
        }
    }

    /// Sends several buffers back to back, in order.
    public func write(_ parts: [[UInt8]]) {
        for part in parts { write(part) }
    }

    /// Sends a small header (from the caller's stack) and a payload with one `writev`. Nothing is
    /// allocated unless the kernel cannot take it all, in which case the unsent header bytes are
    /// copied into the queue and the payload array is queued as is.
    public func write(header: UnsafeRawBufferPointer, payload: [UInt8]) {
        guard !isClosed else { return }
        guard queuedBytes == 0 else {
            write(Array(header))
            write(payload)
            return
        }
        let total = header.count + payload.count
        let written: Int = payload.withUnsafeBytes { body in
            withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { vectors in
                vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
                vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
                return Glibc.writev(fd, vectors.baseAddress, body.count > 0 ? 2 : 1)
            }
        }
        if written == total { return }
        if written < 0, errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
            close(error: .system("writev", errno))
            return
        }
        let sent = max(0, written)
        if sent < header.count {
            enqueue(Array(header[sent...]), offset: 0)
            if !payload.isEmpty { enqueue(payload, offset: 0) }
        } else if sent - header.count < payload.count {
            enqueue(payload, offset: sent - header.count)
        }
    }

    private func enqueue(_ bytes: [UInt8], offset: Int) {
        if queuedBytes == 0 { headOffset = offset }
        queue.append(bytes)
        queuedBytes += bytes.count - (queuedBytes == 0 ? offset : 0)
        if !wantsWrite {
            wantsWrite = true
            updateInterest()
        }
        if isWritable, queuedBytes > highWaterMark {
            isWritable = false
            delegate?.transportWritabilityChanged(self)
        }
    }

    public func writable() { flush() }

    private func flush() {
        while queuedBytes > 0, !isClosed {
            let count = min(queue.count - queueHead, 64)
            var vectors = [iovec](repeating: iovec(), count: count)
            let written: Int = withArrayPointers(count: count) { pointers in
                for i in 0..<count {
                    let offset = i == 0 ? headOffset : 0
                    vectors[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: pointers[i].advanced(by: offset)),
                                       iov_len: queue[queueHead + i].count - offset)
                }
                return Glibc.writev(fd, vectors, Int32(count))
            }
            if written < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                close(error: .system("writev", errno))
                return
            }
            consume(written)
        }
        if queuedBytes == 0 {
            queue.removeAll(keepingCapacity: false)
            queueHead = 0
            headOffset = 0
            if wantsWrite {
                wantsWrite = false
                updateInterest()
            }
            if closeWhenFlushed { close(error: nil) }
        }
    }

    /// Runs `body` with stable base pointers for the first `count` queued arrays.
    private func withArrayPointers<R>(count: Int, _ body: ([UnsafeRawPointer]) -> R) -> R {
        withPointers(queue[queueHead..<(queueHead + count)], body)
    }

    private func consume(_ written: Int) {
        var remaining = written
        queuedBytes -= written
        while remaining > 0 {
            let available = queue[queueHead].count - headOffset
            if remaining >= available {
                remaining -= available
                queue[queueHead] = []
                queueHead += 1
                headOffset = 0
            } else {
                headOffset += remaining
                remaining = 0
            }
        }
        if queueHead > 32, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        if !isWritable, queuedBytes < lowWaterMark {
            isWritable = true
            delegate?.transportWritabilityChanged(self)
        }
    }

    // MARK: Closing

    /// Closes once everything queued has been sent.
    public func closeAfterFlush() {
        guard !isClosed else { return }
        if queuedBytes == 0 { close(error: nil) } else { closeWhenFlushed = true; pauseReading() }
    }

    /// Closes now, dropping anything queued.
    public func close() { close(error: nil) }

    public func hangup() { close(error: nil) }

    private func close(error: NetError?) {
        guard !isClosed else { return }
        isClosed = true
        loop.deregister(fd: fd, token: token)
        Glibc.close(fd)
        queue = []
        queuedBytes = 0
        let delegate = self.delegate
        self.delegate = nil
        delegate?.transportDidClose(self, error: error)
    }

    // MARK: Handoff

    /// Moves this connection to `target`: it leaves this loop's epoll set now and joins the
    /// target's on the target thread, where `then` runs. Bytes that arrive meanwhile wait in the
    /// kernel. After calling this, touch the connection only from `then` onwards.
    public func handoff(to target: EventLoop, then: @escaping @Sendable (TCPConnection) -> Void) {
        handoffEpoch += 1
        loop.deregister(fd: fd, token: token)
        let transfer = UncheckedTransfer(self)
        target.execute {
            let connection = transfer.value
            connection.loop = target
            do {
                connection.token = try target.register(fd: connection.fd, events: connection.interest, handler: connection)
            } catch {
                connection.isClosed = true
                Glibc.close(connection.fd)
                connection.delegate?.transportDidClose(connection, error: error as? NetError)
                return
            }
            then(connection)
        }
    }
}

/// Runs `body` with the base pointers of `arrays`, each valid for the whole call: nested
/// `withUnsafeBytes` scopes, so no pointer outlives its array's access. (The slow, queued path.)
func withPointers<R>(_ arrays: some Collection<[UInt8]>, _ body: ([UnsafeRawPointer]) -> R) -> R {
    let list = Array(arrays)
    func nest(_ i: Int, _ acc: [UnsafeRawPointer]) -> R {
        if i == list.count { return body(acc) }
        return list[i].withUnsafeBytes { nest(i + 1, acc + [$0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!]) }
    }
    return nest(0, [])
}

/// Carries a loop-confined object across a handoff, where only one thread touches it at a time.
struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
