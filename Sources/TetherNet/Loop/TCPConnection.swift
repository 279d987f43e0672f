import CTetherSystem
import Glibc

/// A non-blocking TCP connection confined to one event loop.
///
/// Reads go through the loop's shared buffer, so an idle connection holds no read buffer.
/// Writes are attempted at once; what the kernel does not take is queued (as the caller's own
/// arrays, no copy) and flushed with `writev`. When the queue passes `highWaterMark`,
/// `isWritable` turns false until it drains below `lowWaterMark` — the back-pressure signal a
/// splice uses to pause the other leg.
public final class TCPConnection: EventLoopHandler, Transport, FlushPointWriter {
    // Declared widest first with the flags together: every open socket holds one of these.
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    @exclusivity(unchecked) public private(set) var loop: EventLoop
    public let peer: SocketAddress?
    @exclusivity(unchecked) public var delegate: (any TransportDelegate)?
    public var highWaterMark: Int {
        get { Int(highWaterMarkBits) }
        set { highWaterMarkBits = Int32(clamping: newValue) }
    }
    public var lowWaterMark: Int {
        get { Int(lowWaterMarkBits) }
        set { lowWaterMarkBits = Int32(clamping: newValue) }
    }
    @exclusivity(unchecked) private var token: UInt64 = 0
    @exclusivity(unchecked) private var queue: [Chunk] = []
    @exclusivity(unchecked) private var headerArena: [UInt8] = []
    @exclusivity(unchecked) private var queueHead = 0
    @exclusivity(unchecked) private var headOffset = 0
    @exclusivity(unchecked) public private(set) var queuedBytes = 0
    /// Where this connection's flush waits in its loop's list (while `flushScheduled`).
    @exclusivity(unchecked) private var flushSlot = 0
    let fd: Int32
    @exclusivity(unchecked) private var highWaterMarkBits: Int32 = 256 * 1024
    @exclusivity(unchecked) private var lowWaterMarkBits: Int32 = 64 * 1024
    @exclusivity(unchecked) public private(set) var isWritable = true
    @exclusivity(unchecked) public private(set) var isClosed = false
    @exclusivity(unchecked) public private(set) var isReadingPaused = false
    @exclusivity(unchecked) private var flushScheduled = false
    @exclusivity(unchecked) private var closeWhenFlushed = false
    /// `notifyWhenDrained` was asked and the queue has not emptied since.
    @exclusivity(unchecked) private var drainNotice = false
    @exclusivity(unchecked) private var wantsWrite = false
    /// Set by `handoff` on the old loop, so a read loop in progress stops touching the socket.
    @exclusivity(unchecked) private var isHandingOff = false

    /// Adopts a connected, non-blocking socket on `loop` (call on that loop's thread).
    public init(fd: Int32, loop: EventLoop, peer: SocketAddress?) throws {
        self.fd = fd
        self.loop = loop
        self.peer = peer
        loop.assertInEventLoop()
        _ = tether_set_nodelay(fd)
        token = try loop.register(fd: fd, events: interest, handler: self)
        registeredInterest = interest
    }

    /// The events this connection wants. While reading is paused it asks for neither input nor
    /// the peer's half-close: both are level-triggered, and a FIN that waits unread behind a
    /// paused socket would otherwise wake the loop on every turn. A hang-up or error (always
    /// reported) still reaches it.
    private var interest: UInt32 {
        var events: UInt32 = 0
        if !isReadingPaused { events |= UInt32(TETHER_EPOLLIN | TETHER_EPOLLRDHUP) }
        if wantsWrite { events |= UInt32(TETHER_EPOLLOUT) }
        return events
    }

    /// What the kernel was last told (`interest` may run ahead of it while a pause is lazy).
    @exclusivity(unchecked) private var registeredInterest: UInt32 = 0

    private func updateInterest() {
        guard !isClosed, !isHandingOff else { return }
        let wanted = interest
        guard wanted != registeredInterest else { return }
        loop.modify(fd: fd, token: token, events: wanted)
        registeredInterest = wanted
    }

    // MARK: Reading

    public func readable() {
        // Input arrived while a lazy pause left the kernel watching for it: stop watching now.
        if isReadingPaused { return updateInterest() }
        // A few reads per wake-up keep one busy peer from starving the others on this loop.
        for _ in 0..<4 {
            guard !isClosed, !isReadingPaused, !isHandingOff else { return }
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

    /// Stops reading. The pause is lazy: the kernel is told only if input arrives while it
    /// lasts, so the short pause of an admission (hello sent, storage not yet answered), in which
    /// a well-behaved client sends nothing, costs no system call either way.
    public func pauseReading() {
        loop.assertInEventLoop()
        guard !isReadingPaused else { return }
        isReadingPaused = true
    }

    public func resumeReading() {
        loop.assertInEventLoop()
        guard isReadingPaused else { return }
        isReadingPaused = false
        updateInterest()
    }

    // MARK: Writing
    //
    // Writes are not sent at once: they are queued (the caller's arrays, not copies) and the
    // connection asks its loop for a flush, which happens at the loop's next flush point: the
    // end of the iteration, after every event has been handled, or sooner once handlers have
    // run `EventLoop.flushBudget`. All frames produced while handling one read therefore leave
    // in a single `writev`, as the floor relay does it.

    /// Queues `bytes` for sending.
    public func write(_ bytes: [UInt8]) {
        loop.assertInEventLoop()
        guard !isClosed, !bytes.isEmpty else { return }
        enqueue(.array(bytes), count: bytes.count)
    }

    /// Queues a small header (copied into the connection's header arena, which is released
    /// when the queue drains) and a payload (kept as the caller's array).
    public func writeNow(_ bytes: UnsafeRawBufferPointer) {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        guard queuedBytes == 0, !flushScheduled else { return write(Array(bytes)) }
        let written = tether_send(fd, bytes.baseAddress, bytes.count)
        if written == bytes.count { return }
        if written < 0, errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
            return close(error: .system("send", errno))
        }
        // The kernel took part (or none): the rest waits in the queue like any write.
        write(Array(bytes[max(0, written)...]))
    }

    public func write(header: UnsafeRawBufferPointer, payload: [UInt8]) {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        let start = headerArena.count
        headerArena.append(contentsOf: header)
        enqueue(.header(start: start, count: header.count), count: header.count)
        if !payload.isEmpty { enqueue(.payload(payload), count: payload.count) }
    }

    /// A write as queued. `.array` and `.header` begin a write of their own; `.payload` is the
    /// rest of the `.header` before it, so a write is never cut in two (`discardUnsentOutput`).
    private enum Chunk {
        case array([UInt8])
        case header(start: Int, count: Int)
        case payload([UInt8])

        var count: Int {
            switch self {
            case let .array(bytes), let .payload(bytes): bytes.count
            case let .header(_, count): count
            }
        }

        var beginsAWrite: Bool {
            if case .payload = self { return false }
            return true
        }
    }

    private func enqueue(_ chunk: Chunk, count: Int) {
        if queuedBytes == 0 { headOffset = 0 }
        queue.append(chunk)
        queuedBytes += count
        if !flushScheduled {
            flushScheduled = true
            flushSlot = loop.scheduleFlush(self)
        }
        if isWritable, queuedBytes > highWaterMark {
            isWritable = false
            delegate?.transportWritabilityChanged(self)
        }
    }

    public func writable() { flush() }

    /// Called by the loop at a flush point for connections that queued writes.
    func flushScheduledWrites() {
        flushScheduled = false
        flush()
    }

    /// Sends `bytes` at once when nothing is queued — TLS records go out straight from
    /// OpenSSL's buffer this way — and queues a copy of what the kernel does not take. It never
    /// closes the connection itself: a send error is left for the scheduled flush to meet, so a
    /// caller inside OpenSSL is not re-entered by delegate callbacks.
    func sendOrQueue(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed, !bytes.isEmpty else { return }
        var sent = 0
        if queuedBytes == 0, !flushScheduled, !isHandingOff {
            let written = tether_send(fd, bytes.baseAddress, bytes.count)
            if written == bytes.count { return }
            sent = max(0, written)
        }
        enqueue(.array(Array(bytes[sent...])), count: bytes.count - sent)
    }

    private func flush() {
        while queuedBytes > 0, !isClosed {
            let count = min(queue.count - queueHead, 64)
            let written: Int = headerArena.withUnsafeBytes { arena in
                withUnsafeTemporaryAllocation(of: iovec.self, capacity: count) { vectors in
                    withChunkPointers(count: count, arena: arena) { pointers in
                        for i in 0..<count {
                            let offset = i == 0 ? headOffset : 0
                            vectors[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: pointers[i] + offset),
                                               iov_len: queue[queueHead + i].count - offset)
                        }
                        return Glibc.writev(fd, vectors.baseAddress, Int32(count))
                    }
                }
            }
            if written < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { break }
                close(error: .system("writev", errno))
                return
            }
            consume(written)
            if written == 0 { break }
        }
        if queuedBytes == 0 {
            queue = []
            queueHead = 0
            headOffset = 0
            headerArena = []
            if wantsWrite {
                wantsWrite = false
                updateInterest()
            }
            if closeWhenFlushed { return close(error: nil) }
            if drainNotice {
                drainNotice = false
                delegate?.transportDidDrain(self)
            }
        } else if !wantsWrite {
            // The kernel is full: wait for EPOLLOUT.
            wantsWrite = true
            updateInterest()
        }
    }

    /// Runs `body` with the base pointer of each of the first `count` queued chunks; array
    /// storage stays pinned for the whole call through nested `withUnsafeBytes` scopes.
    private func withChunkPointers<R>(count: Int, arena: UnsafeRawBufferPointer, _ body: (UnsafeBufferPointer<UnsafeRawPointer>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UnsafeRawPointer.self, capacity: count) { pointers in
            func nest(_ i: Int) -> R {
                if i == count { return body(UnsafeBufferPointer(pointers)) }
                switch queue[queueHead + i] {
                case let .array(bytes), let .payload(bytes):
                    return bytes.withUnsafeBytes { raw in
                        pointers.initializeElement(at: i, to: raw.baseAddress!)
                        return nest(i + 1)
                    }
                case let .header(start, _):
                    pointers.initializeElement(at: i, to: arena.baseAddress! + start)
                    return nest(i + 1)
                }
            }
            return nest(0)
        }
    }

    private func consume(_ written: Int) {
        var remaining = written
        queuedBytes -= written
        while remaining > 0 {
            let available = queue[queueHead].count - headOffset
            if remaining >= available {
                remaining -= available
                queue[queueHead] = .array([])
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

    /// Drops every queued write the kernel has not begun to take; one it has begun is kept whole,
    /// so what the peer reads stays a sequence of complete writes (frames, responses).
    public func discardUnsentOutput() {
        loop.assertInEventLoop()
        var cut = queueHead
        if cut < queue.count, headOffset > 0 || !queue[cut].beginsAWrite { cut += 1 }
        while cut < queue.count, !queue[cut].beginsAWrite { cut += 1 }
        guard cut < queue.count else { return }
        queuedBytes -= queue[cut...].reduce(0) { $0 + $1.count }
        queue.removeSubrange(cut...)
        if !isWritable, queuedBytes < lowWaterMark {
            isWritable = true
            delegate?.transportWritabilityChanged(self)
        }
    }

    public func notifyWhenDrained() {
        loop.assertInEventLoop()
        drainNotice = queuedBytes > 0
    }

    // MARK: Closing

    /// Closes once everything queued has been sent.
    public func closeAfterFlush() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        if queuedBytes == 0 { close(error: nil) } else { closeWhenFlushed = true; pauseReading() }
    }

    /// Closes now, dropping anything queued.
    public func close() {
        loop.assertInEventLoop()
        close(error: nil)
    }

    public func hangup() { close(error: nil) }

    private func close(error: NetError?) {
        guard !isClosed else { return }
        isClosed = true
        // close(2) takes the socket out of the epoll set (it is never duplicated): only the
        // loop's slot is released, saving an epoll_ctl per connection.
        loop.release(token: token)
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
    /// kernel. After calling this, touch the connection only from `then` onwards. A connection
    /// that closes first (here, or failing to join the target) never reaches `then`; its
    /// delegate hears of the close instead.
    public func handoff(to target: EventLoop, then: @escaping @Sendable (TCPConnection) -> Void) {
        loop.assertInEventLoop()
        // Send what can be sent here; anything left moves with the connection.
        flush()
        guard !isClosed, !isHandingOff else { return }
        isHandingOff = true
        if flushScheduled {
            loop.cancelFlush(slot: flushSlot, of: self)
            flushScheduled = false
        }
        loop.deregister(fd: fd, token: token)
        // The target's `execute` orders everything this loop did before everything the target
        // does. It is queued only at the flush point, once the read loop (and any TLS record
        // loop above it) that may have called this has returned: the old loop then never
        // touches the connection again.
        let transfer = UncheckedTransfer(self)
        loop.atFlushPoint {
            target.execute { transfer.value.arrive(on: target, then: then) }
        }
    }

    /// The handoff's other end, on the target loop.
    private func arrive(on target: EventLoop, then: @Sendable (TCPConnection) -> Void) {
        loop = target
        isHandingOff = false
        do {
            token = try target.register(fd: fd, events: interest, handler: self)
            registeredInterest = interest
        } catch {
            isClosed = true
            Glibc.close(fd)
            queue = []
            queuedBytes = 0
            let delegate = self.delegate
            self.delegate = nil
            delegate?.transportDidClose(self, error: error as? NetError)
            return
        }
        then(self)
    }

    /// The same as a `Transport`: what protocol code written against any transport calls.
    /// Disfavoured, so a call on a `TCPConnection` still picks the typed overload above.
    @_disfavoredOverload
    public func handoff(to target: EventLoop, then: @escaping @Sendable (any Transport) -> Void) {
        handoff(to: target) { (connection: TCPConnection) in then(connection) }
    }
}

/// Carries a loop-confined object through `@Sendable` code that never touches it — a handoff, a
/// storage lane, a completion — back to its loop, where `EventLoop.execute` orders it after
/// everything the loop did before: only one thread touches it at a time.
public struct UncheckedTransfer<Value>: @unchecked Sendable { // the handoff primitive: its value is touched only back on its own loop
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
