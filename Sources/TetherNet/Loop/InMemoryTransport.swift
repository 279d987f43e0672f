/// One end of two transports joined back to back in memory, so the layers above (a
/// `WebSocketConnection`, a relay room, a whole service) can be driven without sockets — the
/// role swift-nio's `EmbeddedChannel` or an in-memory `net.Conn` pair plays.
///
/// It behaves like a `TCPConnection` on its loop: writes are queued (the caller's arrays, not
/// copies) and leave at the loop's next flush point; the other end's delegate reads them on
/// its own loop afterwards, as if from the kernel. `queuedBytes`
/// counts what was written and not yet read by the other side, so a reader that pauses makes
/// the writer unwritable above `highWaterMark` until it drains below `lowWaterMark`. Closing
/// either end gives the other end-of-stream once it has read what was sent. Either end may be
/// handed to another loop. Everything is called on the end's loop.
public final class InMemoryTransport: Transport, FlushPointWriter {
    public internal(set) var loop: EventLoop
    public let peer: SocketAddress?
    public var delegate: (any TransportDelegate)?
    /// TCPConnection's defaults, so code under test sees the same back-pressure points.
    public var highWaterMark = 256 * 1024
    public var lowWaterMark = 64 * 1024
    public private(set) var isWritable = true
    public private(set) var isClosed = false
    public private(set) var isReadingPaused = false
    let link: InMemoryLink
    let side: Int
    var outgoing: [[UInt8]] = []
    var outgoingBytes = 0
    var flushSlot = 0
    var flushScheduled = false
    var closeWhenFlushed = false
    /// `notifyWhenDrained` was asked and the other end has not read everything since.
    var drainNotice = false
    var isHandingOff = false

    /// Two joined ends: the first on `first`, the second on `second` (default: the same
    /// loop). Each end's `peer` is the address it reports for the other side. Make them on any
    /// thread; use each only on its loop.
    public static func pair(_ first: EventLoop, _ second: EventLoop? = nil,
                            firstPeer: SocketAddress? = nil, secondPeer: SocketAddress? = nil) -> (InMemoryTransport, InMemoryTransport) {
        let link = InMemoryLink(first, second ?? first)
        let a = InMemoryTransport(link: link, side: 0, loop: first, peer: firstPeer)
        let b = InMemoryTransport(link: link, side: 1, loop: second ?? first, peer: secondPeer)
        // The link holds each end until it closes, as a loop holds a registered socket.
        link.ends[0].transport = a
        link.ends[1].transport = b
        return (a, b)
    }

    private init(link: InMemoryLink, side: Int, loop: EventLoop, peer: SocketAddress?) {
        self.link = link
        self.side = side
        self.loop = loop
        self.peer = peer
    }

    var other: Int { 1 - side }

    /// Written and not yet read by the other end's delegate.
    public var queuedBytes: Int { outgoingBytes + link.lock.withLock { link.ends[other].inboxBytes } }

    // MARK: Writing

    public func write(_ bytes: [UInt8]) {
        loop.assertInEventLoop()
        guard !isClosed, !bytes.isEmpty else { return }
        outgoing.append(bytes)
        outgoingBytes += bytes.count
        if !flushScheduled {
            flushScheduled = true
            flushSlot = loop.scheduleFlush(self)
        }
        guard isWritable else { return }
        // Decided under the lock, so the other end's next drain is sure to see the wait.
        let over = link.lock.withLock {
            guard outgoingBytes + link.ends[other].inboxBytes > highWaterMark else { return false }
            link.ends[side].waitingForDrain = true
            return true
        }
        if over {
            isWritable = false
            delegate?.transportWritabilityChanged(self)
        }
    }

    public func write(header: UnsafeRawBufferPointer, payload: [UInt8]) {
        write(Array(header))
        write(payload)
    }

    func flushScheduledWrites() {
        flushScheduled = false
        sendOutgoing()
    }

    /// Moves what was written into the other end's inbox and asks its loop to deliver it.
    func sendOutgoing() {
        if !outgoing.isEmpty {
            let chunks = outgoing
            let count = outgoingBytes
            outgoing = []
            outgoingBytes = 0
            let deliver = link.lock.withLock { () -> (@Sendable () -> Void)? in
                // A closed end takes nothing (a reset, in TCP terms); this end hears of the close.
                guard link.ends[other].transport != nil else { return nil }
                link.ends[other].inbox += chunks
                link.ends[other].inboxBytes += count
                return link.deliveryTask(for: other)
            }
            deliver?()
        }
        if closeWhenFlushed { close() }
    }

    // MARK: Reading

    public func pauseReading() {
        loop.assertInEventLoop()
        isReadingPaused = true
    }

    public func resumeReading() {
        loop.assertInEventLoop()
        guard isReadingPaused, !isClosed else { return }
        isReadingPaused = false
        link.lock.withLock { link.deliveryTask(for: side) }?()
    }

    /// Hands the inbox to the delegate, then end-of-stream if the other end has closed. Runs
    /// as a loop task; one queued before a handoff finds the end gone and does nothing.
    func deliverInbox(scheduledOn scheduled: EventLoop) {
        let taken = link.lock.withLock { () -> (chunks: [[UInt8]], peerClosed: Bool, drained: (@Sendable () -> Void)?)? in
            guard link.ends[side].loop === scheduled, !link.ends[side].inTransit else { return nil }
            link.ends[side].deliveryScheduled = false
            guard link.ends[side].transport != nil, !isReadingPaused else { return nil }
            let chunks = link.ends[side].inbox
            link.ends[side].inbox = []
            link.ends[side].inboxBytes = 0
            return (chunks, link.ends[side].peerClosed, link.drainCheckTask(for: other))
        }
        guard let taken else { return }
        taken.drained?()
        for (index, chunk) in taken.chunks.enumerated() {
            guard !isClosed else { return }
            if isReadingPaused || isHandingOff {
                // The delegate paused (or moved the transport) mid-way: the rest waits, in order.
                let rest = Array(taken.chunks[index...])
                link.lock.withLock {
                    link.ends[side].inbox.insert(contentsOf: rest, at: 0)
                    link.ends[side].inboxBytes += rest.reduce(0) { $0 + $1.count }
                }
                return
            }
            chunk.withUnsafeBytes { delegate?.transport(self, didRead: $0) }
        }
        if taken.peerClosed, !isClosed, !isReadingPaused, !isHandingOff,
           link.lock.withLock({ link.ends[side].inbox.isEmpty }) {
            close()
        }
    }

    /// The other end drained: writable again once below the low-water mark, drained (as
    /// `notifyWhenDrained` asked) once nothing is left.
    func checkWritability(scheduledOn scheduled: EventLoop) {
        let queued = link.lock.withLock { () -> Int? in
            guard link.ends[side].loop === scheduled, !link.ends[side].inTransit else { return nil }
            link.ends[side].drainCheckScheduled = false
            let queued = outgoingBytes + link.ends[other].inboxBytes
            if queued < lowWaterMark, !(drainNotice && queued > 0) { link.ends[side].waitingForDrain = false }
            return queued
        }
        guard let queued, !isClosed else { return }
        if !isWritable, queued < lowWaterMark {
            isWritable = true
            delegate?.transportWritabilityChanged(self)
        }
        if drainNotice, queued == 0 {
            drainNotice = false
            delegate?.transportDidDrain(self)
        }
    }

    /// What was written since the last flush has not left; what the other end's inbox holds has.
    public func discardUnsentOutput() {
        loop.assertInEventLoop()
        outgoing = []
        outgoingBytes = 0
    }

    public func notifyWhenDrained() {
        loop.assertInEventLoop()
        guard queuedBytes > 0 else { return }
        drainNotice = true
        link.lock.withLock { link.ends[side].waitingForDrain = true }
    }

    // MARK: Closing

    public func closeAfterFlush() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        if outgoing.isEmpty {
            close()
        } else {
            closeWhenFlushed = true
            pauseReading()
        }
    }

    public func close() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        isClosed = true
        if flushScheduled {
            loop.cancelFlush(slot: flushSlot, of: self)
            flushScheduled = false
        }
        outgoing = []
        outgoingBytes = 0
        let notify = link.lock.withLock { () -> (@Sendable () -> Void)? in
            link.ends[side].transport = nil
            link.ends[side].inbox = []
            link.ends[side].inboxBytes = 0
            guard link.ends[other].transport != nil else { return nil }
            link.ends[other].peerClosed = true
            return link.deliveryTask(for: other)
        }
        notify?()
        let delegate = self.delegate
        self.delegate = nil
        delegate?.transportDidClose(self, error: nil)
    }
}
