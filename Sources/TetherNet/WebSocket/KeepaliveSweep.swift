/// Keepalive for every WebSocket on a loop with one timer instead of one per socket (relay.md
/// §2.8): each sweep drops the sockets that did not answer the previous sweep's ping and pings
/// the rest. Sockets are linked into an intrusive list, so tracking one costs two pointers.
final class KeepaliveSweep {
    let loop: EventLoop
    let interval: Duration
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    @exclusivity(unchecked) private(set) var head: WebSocketConnection?
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private var timer: EventLoop.TimerID?

    init(loop: EventLoop, interval: Duration) {
        self.loop = loop
        self.interval = interval
    }

    func add(_ socket: WebSocketConnection) {
        loop.assertInEventLoop()
        socket.sweepNext = head
        socket.sweepPrevious = nil
        head?.sweepPrevious = socket
        head = socket
        count += 1
        if timer == nil { arm() }
    }

    func remove(_ socket: WebSocketConnection) {
        loop.assertInEventLoop()
        if let previous = socket.sweepPrevious { previous.sweepNext = socket.sweepNext } else if head === socket { head = socket.sweepNext }
        socket.sweepNext?.sweepPrevious = socket.sweepPrevious
        socket.sweepNext = nil
        socket.sweepPrevious = nil
        count -= 1
    }

    private func arm() {
        timer = loop.schedule(after: interval) { [unowned(unsafe) self] in self.sweep() }
    }

    private func sweep() {
        timer = nil
        var cursor = head
        while let socket = cursor {
            // The socket may unlink itself (terminate), so step first.
            cursor = socket.sweepNext
            socket.keepaliveTick()
        }
        if head != nil { arm() }
    }
}

extension EventLoop {
    /// The loop's sweep for `interval` (created on first use; lives as long as the loop).
    func keepaliveSweep(interval: Duration) -> KeepaliveSweep {
        assertInEventLoop()
        if let sweep = sweeps[interval] { return sweep }
        let sweep = KeepaliveSweep(loop: self, interval: interval)
        sweeps[interval] = sweep
        return sweep
    }
}
