import Glibc

extension LogSink {
    /// The writer thread: takes every queued line at once, writes each with one call, then the
    /// drop report, then releases the flushes that were waiting for those lines.
    func drain() {
        while true {
            wakeup.wait()
            let (batch, drops, barriers, closed) = state.withLock { state in
                defer {
                    state.queued = []
                    state.unreported = 0
                    state.barriers = []
                }
                return (state.queued, state.unreported, state.barriers, state.closed)
            }
            for line in batch { output(line) }
            // Reported once space has returned: the batch just taken freed the whole queue.
            if drops > 0 { output(Self.encode("\(name): \(drops) log line\(drops == 1 ? "" : "s") dropped: standard error was too slow")) }
            for barrier in barriers { barrier.signal() }
            if closed { return }
        }
    }

    /// The line as written: UTF-8, control characters (a newline above all) as spaces, one `\n`.
    static func encode(_ line: String) -> [UInt8] {
        var bytes = Array(line.utf8)
        for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == 0x7F { bytes[index] = 0x20 }
        bytes.append(0x0A)
        return bytes
    }

    /// One line, one write(2) to standard error (retried only for what a short write left): lines
    /// never interleave, and nothing is buffered that a crash could lose.
    @Sendable public static func standardError(_ line: [UInt8]) { write(line, to: 2) }

    /// Writes all of `bytes` to `descriptor`, retrying after EINTR and short writes; gives up
    /// silently on any other error (a log has nowhere to report its own failure).
    public static func write(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written > 0 { offset += written } else if errno != EINTR { return }
            }
        }
    }
}
