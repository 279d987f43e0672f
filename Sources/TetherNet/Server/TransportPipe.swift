/// Two transports on one loop joined byte for byte, each way: what one reads the other writes.
/// A forwarding node sits between a client and the node that serves it, and neither end can tell.
///
/// Memory is bounded whatever either end does: while one side's output stands above its
/// transport's high-water mark, the other side is not read, so a pipe holds at most one
/// high-water mark plus one read per direction. A close on either side closes the other once
/// what it was sent has left; `finished` runs once, when both are closed.
public final class TransportPipe {
    private let first: any Transport
    private let second: any Transport
    private var firstClosed = false
    private var secondClosed = false
    private var finished: ((TransportPipe) -> Void)?
    /// Both ends have closed (`finished` has run).
    public private(set) var isFinished = false
    /// The ends' delegates, which hold the pipe while it runs.
    private var sides: [Side] = []

    /// Joins `a` and `b` (both on the loop this is called on) and starts reading both.
    /// `finished` runs on that loop once both have closed (perhaps before this returns, when
    /// both already had).
    public init(_ a: any Transport, _ b: any Transport, finished: @escaping (TransportPipe) -> Void) {
        precondition(a.loop === b.loop && a.loop.inEventLoop, "a pipe's ends share the loop it runs on")
        first = a
        second = b
        self.finished = finished
        let sides = [Side(pipe: self, index: 0), Side(pipe: self, index: 1)]
        self.sides = sides
        a.delegate = sides[0]
        b.delegate = sides[1]
        // Either end may already be closed (the client left while the other end connected).
        if a.isClosed { didClose(0) }
        if b.isClosed { didClose(1) }
        if !a.isClosed { a.resumeReading() }
        if !b.isClosed { b.resumeReading() }
    }

    private func end(_ index: Int) -> any Transport { index == 0 ? first : second }

    fileprivate func read(_ bytes: UnsafeRawBufferPointer, from index: Int) {
        let target = end(1 - index)
        guard !target.isClosed else { return }
        target.write(Array(bytes))
        if !target.isWritable { end(index).pauseReading() }
    }

    fileprivate func writabilityChanged(_ index: Int) {
        let source = end(1 - index)
        guard !source.isClosed else { return }
        if end(index).isWritable { source.resumeReading() } else { source.pauseReading() }
    }

    fileprivate func didClose(_ index: Int) {
        if index == 0 {
            guard !firstClosed else { return }
            firstClosed = true
        } else {
            guard !secondClosed else { return }
            secondClosed = true
        }
        let other = end(1 - index)
        if !other.isClosed { other.closeAfterFlush() }
        guard firstClosed, secondClosed, let finished else { return }
        self.finished = nil
        isFinished = true
        finished(self)
        // The sides hold the pipe (and the pipe its ends) for as long as it runs. They are let go
        // on the loop's next turn: here we are inside a transport's own close, and dropping the
        // last reference to it now would free it in the middle of that call.
        let this = UncheckedTransfer(self)
        first.loop.execute { this.value.sides = [] }
    }

    /// Closes both ends now (a node shutting down).
    public func close() {
        first.close()
        second.close()
    }
}

/// One end's delegate. The pipe keeps itself alive through its sides, which the transports hold
/// as delegates until both have closed.
private final class Side: TransportDelegate {
    let pipe: TransportPipe
    let index: Int

    init(pipe: TransportPipe, index: Int) {
        self.pipe = pipe
        self.index = index
    }

    func transport(_ transport: any Transport, didRead bytes: UnsafeRawBufferPointer) { pipe.read(bytes, from: index) }
    func transportDidClose(_ transport: any Transport, error: NetError?) { pipe.didClose(index) }
    func transportWritabilityChanged(_ transport: any Transport) { pipe.writabilityChanged(index) }
}
