import COpenSSL

extension TLSConnection {
    /// Moves the connection — its TCP socket and its SSL session, memory BIO and all — to
    /// `target`, where `then` runs. What was written so far is encrypted here first; records
    /// already read but not yet decrypted are decrypted on the target, after `then` (which sets
    /// up the new owner) has run. After calling this, touch the connection only from `then`.
    public func handoff(to target: EventLoop, then: @escaping @Sendable (any Transport) -> Void) {
        loop.assertInEventLoop()
        guard !closed, !isHandingOff else { return }
        sendOutgoing()
        guard !closed else { return }
        isHandingOff = true
        if flushScheduled {
            loop.cancelFlush(slot: flushSlot, of: self)
            flushScheduled = false
        }
        // The TCP handoff crosses to the target through its `execute`, at this loop's flush
        // point, once the read loops above have returned; nothing here runs after that.
        let transfer = UncheckedTransfer(self)
        tcp.handoff(to: target) { _ in transfer.value.arrive(then: then) }
    }

    private func arrive(then: @Sendable (any Transport) -> Void) {
        isHandingOff = false
        then(self)
        guard !closed, !isHandingOff else { return }
        scheduleFlushIfNeeded()
        // Ciphertext read on the old loop (or plaintext OpenSSL already decrypted) waits for
        // no further socket event.
        if BIO_ctrl_pending(networkIn) > 0 || SSL_pending(ssl) > 0 { processInput() }
    }
}
