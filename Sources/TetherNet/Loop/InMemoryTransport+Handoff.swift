extension InMemoryTransport {
    /// Moves this end to `target`, where `then` runs. What was written so far is handed to the
    /// other end here; bytes sent to this end meanwhile wait in its inbox and are read on the
    /// target after `then`. After calling this, touch the end only from `then` onwards.
    public func handoff(to target: EventLoop, then: @escaping @Sendable (any Transport) -> Void) {
        loop.assertInEventLoop()
        guard !isClosed, !isHandingOff else { return }
        sendOutgoing()
        guard !isClosed else { return }
        if flushScheduled {
            loop.cancelFlush(slot: flushSlot, of: self)
            flushScheduled = false
        }
        isHandingOff = true
        link.lock.withLock { link.ends[side].inTransit = true }
        // As for TCP: crossed at the flush point, once whatever called this has returned.
        let transfer = UncheckedTransfer(self)
        loop.atFlushPoint {
            target.execute { transfer.value.arrive(on: target, then: then) }
        }
    }

    private func arrive(on target: EventLoop, then: @Sendable (any Transport) -> Void) {
        loop = target
        isHandingOff = false
        // Tasks queued for the old loop are void now; this end's are queued afresh below.
        link.lock.withLock {
            link.ends[side].loop = target
            link.ends[side].inTransit = false
            link.ends[side].deliveryScheduled = false
            link.ends[side].drainCheckScheduled = false
        }
        then(self)
        guard !isClosed else { return }
        let tasks = link.lock.withLock { [link.deliveryTask(for: side), link.drainCheckTask(for: side)] }
        for task in tasks { task?() }
    }
}
