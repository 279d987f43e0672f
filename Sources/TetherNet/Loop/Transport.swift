/// A byte stream the protocol layers run on: a plain `TCPConnection` or a `TLSConnection` over
/// one. HTTP and WebSocket code sees only this, so the same server runs with or without TLS.
/// Everything is called on the transport's loop; `handoff` moves it to another.
public protocol Transport: AnyObject {
    var loop: EventLoop { get }
    var peer: SocketAddress? { get }
    /// False while the send queue is above its high-water mark (back-pressure).
    var isWritable: Bool { get }
    var isClosed: Bool { get }
    /// Bytes accepted by `write` but not yet handed to the kernel.
    var queuedBytes: Int { get }
    var delegate: (any TransportDelegate)? { get set }

    func write(_ bytes: [UInt8])
    /// A small header and a payload back to back (one `writev` on plain TCP).
    func write(header: UnsafeRawBufferPointer, payload: [UInt8])
    /// A few bytes written at once when nothing is queued (else queued like `write`): a ping
    /// sweep over thousands of idle sockets then allocates nothing per socket.
    func writeNow(_ bytes: UnsafeRawBufferPointer)
    /// Asks for one `transportDidDrain` once nothing written so far is still queued (call it
    /// while `queuedBytes > 0`): a reply that only the latest request needs (a pong) waits for it
    /// instead of piling up behind output the peer is not reading.
    func notifyWhenDrained()
    /// Drops queued output the peer has not begun to receive, keeping any write already partly
    /// sent whole (a connection about to close, whose peer is not reading).
    func discardUnsentOutput()
    /// Closes once everything queued is sent.
    func closeAfterFlush()
    /// Closes now.
    func close()
    func pauseReading()
    func resumeReading()
    /// Moves the transport, with everything it holds (queued output, a TLS session), to
    /// `target`'s loop; `then` runs there once it has arrived. After calling this, touch the
    /// transport only from `then` onwards. A transport that closes before it arrives never
    /// reaches `then`; its delegate hears of the close instead.
    func handoff(to target: EventLoop, then: @escaping @Sendable (any Transport) -> Void)
}

/// What a transport tells the layer above it.
public protocol TransportDelegate: AnyObject {
    /// Bytes arrived; the buffer is borrowed (the loop's), so consume or copy it now.
    func transport(_ transport: any Transport, didRead bytes: UnsafeRawBufferPointer)
    /// The transport closed, by either side; called exactly once.
    func transportDidClose(_ transport: any Transport, error: NetError?)
    /// `isWritable` changed.
    func transportWritabilityChanged(_ transport: any Transport)
    /// Everything queued has left, as asked with `notifyWhenDrained`.
    func transportDidDrain(_ transport: any Transport)
}

public extension Transport {
    func writeNow(_ bytes: UnsafeRawBufferPointer) { write(Array(bytes)) }
}

public extension TransportDelegate {
    func transportWritabilityChanged(_ transport: any Transport) {}
    func transportDidDrain(_ transport: any Transport) {}
}
