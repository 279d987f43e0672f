import CTetherSystem
import Glibc
import Synchronization
import TetherSync

/// The line logger every service writes through. A loop thread never waits on a slow standard
/// error (a stalled journald, a paused terminal): `log` only appends to a bounded queue, and one
/// writer thread drains it in batches, one write(2) per chunk of whole lines (at most PIPE_BUF
/// bytes, so atomic on a pipe), so lines from several loops never interleave. When the queue is full the line is dropped and counted; the count is exposed for
/// a metric (`droppedLines`) and reported in a line of its own once the writer catches up.
///
/// Zero-PII is the caller's rule — rooms appear as tags, never names, IPs or content (relay.md
/// §9.1). The sink keeps each entry on one line: control characters become spaces, so no text
/// can forge a line of its own.
public final class LogSink: Sendable {
    /// Lines waiting for the writer. At ~100 bytes a line, 8,192 lines is under a megabyte, and
    /// it absorbs seconds of a connection storm's always-on lines while stderr is stalled.
    public static let defaultCapacity = 8_192
    /// The writer thread's nice value (the loops run at the process's own, normally 0).
    static let writerNiceness: Int32 = 10
    /// How long the writer waits after a batch before it sleeps again (`linger`), so the lines
    /// of the next few milliseconds go out together: 5 ms caps the writer at 200 wake-ups a
    /// second however fast lines come, and is too short for anyone reading a log to notice.
    public static let defaultLinger: Duration = .milliseconds(5)

    /// What the drop report and the toggle lines start with (`relay`); the JSON lines' `service`.
    public let name: String
    /// How each line is written.
    public let format: LogFormat
    /// How many lines may wait for the writer; past that a line is dropped and counted.
    public let capacity: Int
    let output: @Sendable ([UInt8]) -> Void
    let lingerMicroseconds: UInt32
    let state: Locked<State>
    let wakeup = ThreadSemaphore()
    private let verboseFlag: Atomic<Bool>
    private let dropped = Atomic<Int>(0)
    private let writer: Locked<pthread_t?>

    struct State: ~Copyable {
        /// Encoded lines (newline included), oldest first. The writer takes them all at once, so
        /// at most twice `capacity` lines are held: the queue and the batch being written.
        var queued: [[UInt8]] = []
        /// Drops not yet reported in a line.
        var unreported = 0
        /// Flushes waiting for the lines queued before them.
        var barriers: [ThreadSemaphore] = []
        var closed = false
    }

    /// A sink with its writer thread started.
    ///
    /// - Parameters:
    ///   - name: the service (`relay`): what the sink's own lines start with, and JSON's `service`.
    ///   - verbose: whether debug lines are written (SIGUSR2 toggles it).
    ///   - format: how each line is written.
    ///   - capacity: lines that may wait for the writer; past it a line is dropped and counted.
    ///   - linger: how long the writer gathers lines after a batch (`defaultLinger`; zero writes
    ///     each batch as soon as it is woken). A `flush` waits at most one linger.
    ///   - output: writes one chunk of whole encoded lines (each ending in a newline, at most
    ///     PIPE_BUF bytes unless a single line is longer); the default writes it to standard error
    ///     with one write(2). Called only on the writer thread (or, after `close`, on the caller's).
    public init(name: String, verbose: Bool = false, format: LogFormat = .plain, capacity: Int = LogSink.defaultCapacity,
                linger: Duration = LogSink.defaultLinger,
                output: @escaping @Sendable ([UInt8]) -> Void = LogSink.standardError) {
        precondition(capacity > 0)
        self.name = name
        self.format = format
        self.capacity = capacity
        self.output = output
        let (seconds, attoseconds) = linger.components
        lingerMicroseconds = UInt32(clamping: max(0, seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
        verboseFlag = Atomic(verbose)
        state = Locked(State())
        writer = Locked(nil)
        let thread = DedicatedThread.start(name: "tether-log") { [self] in
            // Below the loops' priority: a log line never preempts a loop that is splicing; the
            // writer runs when a loop waits, or on its share under load, taking lines in batches.
            _ = tether_set_thread_nice(Self.writerNiceness)
            drain()
        }
        writer.withLock { $0 = thread }
    }

    /// Queues `line` for the writer; never blocks on the output. After `close`, writes it at once.
    public func log(_ line: String, level: LogLevel = .info) {
        let bytes = encode(line, level: level)
        let (accepted, wake, closed) = state.withLock { state -> (Bool, Bool, Bool) in
            if state.closed { return (false, false, true) }
            guard state.queued.count < capacity else {
                state.unreported += 1
                return (false, false, false)
            }
            state.queued.append(bytes)
            // Only the first line of a batch needs to wake the writer: it takes the rest with it.
            return (true, state.queued.count == 1, false)
        }
        if closed { return output(bytes) }
        if !accepted { dropped.add(1, ordering: .relaxed) }
        if wake { wakeup.signal() }
    }

    /// A verbose-only line; `line` is not even built while verbose logging is off.
    public func diagnostic(_ line: @autoclosure () -> String) {
        if verbose { log(line(), level: .debug) }
    }

    /// Verbose diagnostics (`RELAY_LOG`), flipped at runtime by SIGUSR2.
    public var verbose: Bool {
        get { verboseFlag.load(ordering: .relaxed) }
        set { verboseFlag.store(newValue, ordering: .relaxed) }
    }

    /// Flips verbose logging and logs the change (`relay: verbose logging on (SIGUSR2)`);
    /// returns the new state.
    @discardableResult
    public func toggleVerbose(reason: String = "SIGUSR2") -> Bool {
        let now = verboseFlag.logicalXor(true, ordering: .relaxed).newValue
        log("\(name): verbose logging \(now ? "on" : "off") (\(reason))")
        return now
    }

    /// Lines dropped because the queue was full, since start (for a counter metric).
    public var droppedLines: Int { dropped.load(ordering: .relaxed) }

    /// Returns once every line logged before the call has been written. Blocks the caller: for
    /// shutdown and tests, not a loop's hot path.
    public func flush() {
        let barrier = ThreadSemaphore()
        let queued = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.barriers.append(barrier)
            return true
        }
        guard queued else { return }
        wakeup.signal()
        barrier.wait()
    }

    /// Flushes, stops the writer thread and joins it; later lines are written synchronously by
    /// whoever logs them (the last lines of a shutdown are never lost). Idempotent.
    public func close() {
        flush()
        state.withLock { $0.closed = true }
        wakeup.signal()
        if let thread = writer.withLock({ state -> pthread_t? in defer { state = nil }; return state }) {
            pthread_join(thread, nil)
        }
    }
}
