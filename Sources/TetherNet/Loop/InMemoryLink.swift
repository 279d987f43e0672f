/// What the two ends of an `InMemoryTransport` pair share: each end's inbox (bytes flushed to
/// it and not yet delivered), where it lives, and whether it is still open. The ends may sit on
/// different loops, so this is the one place both threads touch, always under `lock`.
final class InMemoryLink: @unchecked Sendable {   // every field is guarded by `lock`
    struct End {
        /// Nil once this end has closed (the link then stops holding it).
        var transport: InMemoryTransport?
        var loop: EventLoop
        /// Between `handoff` and the arrival: nothing is scheduled for this end meanwhile.
        var inTransit = false
        var inbox: [[UInt8]] = []
        var inboxBytes = 0
        /// A delivery task is queued on `loop`.
        var deliveryScheduled = false
        /// The other end has closed: after the inbox, this end reads end-of-stream.
        var peerClosed = false
        /// This end is unwritable until the other end drains its inbox below the low mark.
        var waitingForDrain = false
        var drainCheckScheduled = false
    }

    let lock = NetLock()
    var ends: [End]

    init(_ first: EventLoop, _ second: EventLoop) {
        ends = [End(loop: first), End(loop: second)]
    }

    /// The task that delivers `side`'s inbox, if one should be queued now (call under `lock`).
    func deliveryTask(for side: Int) -> (@Sendable () -> Void)? {
        guard let transport = ends[side].transport, !ends[side].inTransit, !ends[side].deliveryScheduled,
              !ends[side].inbox.isEmpty || ends[side].peerClosed else { return nil }
        ends[side].deliveryScheduled = true
        let loop = ends[side].loop
        let transfer = UncheckedTransfer(transport)
        return { loop.execute { transfer.value.deliverInbox(scheduledOn: loop) } }
    }

    /// The task that tells `side` the other end drained, if it is waiting for that (under `lock`).
    func drainCheckTask(for side: Int) -> (@Sendable () -> Void)? {
        guard let transport = ends[side].transport, !ends[side].inTransit, ends[side].waitingForDrain,
              !ends[side].drainCheckScheduled else { return nil }
        ends[side].drainCheckScheduled = true
        let loop = ends[side].loop
        let transfer = UncheckedTransfer(transport)
        return { loop.execute { transfer.value.checkWritability(scheduledOn: loop) } }
    }
}
