import COpenSSL

/// Output: plaintext is gathered until the loop's next flush point (the end of the iteration,
/// or sooner once handlers have run `EventLoop.flushBudget`) and encrypted once there. Each
/// payload is copied at most once on its way to the socket — into the gather buffer, and only
/// when it shares the flush with other writes; a lone array is encrypted from
/// the caller's own storage — and the ciphertext goes from OpenSSL's record buffer to the
/// kernel (`TLSSocketSink`), copied only if the kernel does not take it all.
extension TLSConnection {
    public func write(_ bytes: [UInt8]) {
        loop.assertInEventLoop()
        guard !closed, !bytes.isEmpty else { return }
        outgoing.append(.array(bytes))
        outgoingBytes += bytes.count
        queued()
    }

    public func write(header: UnsafeRawBufferPointer, payload: [UInt8]) {
        loop.assertInEventLoop()
        guard !closed else { return }
        // Header and payload are gathered into one record at the flush.
        let start = headerArena.count
        headerArena.append(contentsOf: header)
        outgoing.append(.header(start: start, count: header.count))
        outgoingBytes += header.count
        if !payload.isEmpty {
            outgoing.append(.array(payload))
            outgoingBytes += payload.count
        }
        queued()
    }

    private func queued() {
        scheduleFlushIfNeeded()
        if isWritable, queuedBytes > tcp.highWaterMark { updateWritability() }
    }

    /// Asks the loop for a flush, once per flush point; output waits for the handshake.
    func scheduleFlushIfNeeded() {
        guard handshakeDone, !flushScheduled, !isHandingOff, outgoingBytes > 0 else { return }
        flushScheduled = true
        flushSlot = loop.scheduleFlush(self)
    }

    func flushScheduledWrites() {
        flushScheduled = false
        sendOutgoing()
        checkDrained()
    }

    /// Plaintext not yet encrypted is dropped; records already made are kept (cutting them would
    /// break the TLS stream), and each holds whole writes, as every flush encrypts all it gathered.
    public func discardUnsentOutput() {
        loop.assertInEventLoop()
        outgoing = []
        headerArena = []
        outgoingBytes = 0
        updateWritability()
    }

    public func notifyWhenDrained() {
        loop.assertInEventLoop()
        drainNotice = queuedBytes > 0
        checkDrained()
    }

    /// Tells the delegate once plaintext and ciphertext have both left, as `notifyWhenDrained`
    /// asked: plaintext leaves at the flush point, ciphertext when the TCP queue drains.
    func checkDrained() {
        guard drainNotice, !closed else { return }
        if queuedBytes == 0 {
            drainNotice = false
            delegate?.transportDidDrain(self)
        } else if outgoingBytes == 0 {
            tcp.notifyWhenDrained()
        }
    }

    /// Encrypts everything gathered: one `SSL_write` for up to a gather buffer's worth (64 KiB,
    /// four full records) of small writes; a lone array, or one too large to gather, is
    /// encrypted in place.
    func sendOutgoing() {
        guard handshakeDone, !closed, outgoingBytes > 0 else { return }
        let chunks = outgoing
        let arena = headerArena
        outgoing = []
        headerArena = []
        outgoingBytes = 0
        engine {
            if chunks.count == 1, case let .array(bytes) = chunks[0] {
                bytes.withUnsafeBytes { encrypt($0) }
                return
            }
            let gather = loop.tlsGatherBuffer
            var used = 0
            arena.withUnsafeBytes { arena in
                for chunk in chunks where !closed {
                    switch chunk {
                    case let .header(start, count):
                        append(UnsafeRawBufferPointer(rebasing: arena[start..<(start + count)]), to: gather, used: &used)
                    case let .array(bytes):
                        bytes.withUnsafeBytes { append($0, to: gather, used: &used) }
                    }
                }
            }
            if used > 0, !closed { encrypt(UnsafeRawBufferPointer(rebasing: gather[..<used])) }
        }
    }

    /// Adds `bytes` to the gather buffer, encrypting what is gathered first when it would not
    /// fit; bytes larger than the whole buffer are encrypted where they are.
    private func append(_ bytes: UnsafeRawBufferPointer, to gather: UnsafeMutableRawBufferPointer, used: inout Int) {
        guard !closed else { return }
        if used + bytes.count > gather.count, used > 0 {
            encrypt(UnsafeRawBufferPointer(rebasing: gather[..<used]))
            used = 0
        }
        if bytes.count > gather.count {
            encrypt(bytes)
        } else {
            UnsafeMutableRawBufferPointer(rebasing: gather[used..<(used + bytes.count)]).copyMemory(from: bytes)
            used += bytes.count
        }
    }

    /// `SSL_write` until all of `bytes` is in records (partial writes return per record).
    private func encrypt(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count, !closed {
            let n = SSL_write(ssl, bytes.baseAddress! + offset, Int32(clamping: bytes.count - offset))
            guard n > 0 else { return fail(.handshake("SSL_write: \(TLSError.lastError())")) }
            offset += Int(n)
        }
    }

    /// Turns unwritable above the TCP connection's high-water mark and writable again below its
    /// low one, counting plaintext not yet encrypted with ciphertext not yet sent.
    func updateWritability() {
        let queued = queuedBytes
        if isWritable, queued > tcp.highWaterMark {
            isWritable = false
            delegate?.transportWritabilityChanged(self)
        } else if !isWritable, queued < tcp.lowWaterMark {
            isWritable = true
            delegate?.transportWritabilityChanged(self)
        }
    }
}
