import Glibc

extension LogSink {
    /// The writer thread: takes every queued line at once, writes them in as few calls as
    /// `writes(of:)` allows, then the drop report, then releases the flushes that were waiting
    /// for those lines; then lingers before it sleeps again.
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
            var lines = batch
            // Reported once space has returned: the batch just taken freed the whole queue.
            if drops > 0 { lines.append(encode("\(name): \(drops) log line\(drops == 1 ? "" : "s") dropped: standard error was too slow", level: .warning)) }
            for chunk in Self.writes(of: lines) { output(chunk) }
            for barrier in barriers { barrier.signal() }
            if closed { return }
            // Lines logged while the writer lingers only queue (their wake-up finds it awake, a
            // plain atomic add): a connection storm's always-on lines cost a few hundred writer
            // wake-ups a second and a few writes each, not a wake-up and a write per line.
            if lingerMicroseconds > 0, barriers.isEmpty { usleep(lingerMicroseconds) }
        }
    }

    /// The largest write that stays one atomic write on a pipe (POSIX PIPE_BUF on Linux): a
    /// batch is cut into writes of whole lines no larger than this, so no other writer to the
    /// same standard error (journald's stream, a terminal) can land in the middle of a line.
    static let atomicWriteLimit = 4_096

    /// `lines` joined into as few chunks as possible, each of whole lines and at most
    /// `atomicWriteLimit` bytes (a longer line is a chunk of its own).
    static func writes(of lines: [[UInt8]]) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var current: [UInt8] = []
        for line in lines {
            if !current.isEmpty, current.count + line.count > atomicWriteLimit {
                chunks.append(current)
                current = []
            }
            if current.isEmpty { current.reserveCapacity(atomicWriteLimit) }
            current.append(contentsOf: line)
        }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }

    /// The line as written: UTF-8, control characters (a newline above all) as spaces, one `\n`.
    /// One line in the sink's format.
    func encode(_ line: String, level: LogLevel) -> [UInt8] { format.encode(line, level: level, service: name) }

    /// One chunk of whole lines, one write(2) to standard error (retried only for what a short
    /// write left): lines never interleave, and nothing is held back that a crash could lose
    /// beyond the writer's linger.
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
