import CTetherSystem
import Glibc
import Synchronization
import TetherSync

/// The process's signals, taken synchronously by one dedicated thread with `sigwait` — never in
/// an asynchronous handler, where almost nothing is safe to do:
///
/// - SIGTERM, SIGINT, SIGQUIT: graceful shutdown, once (a second signal while shutting down is
///   ignored); SIGQUIT is a supervisor's other usual stop, and blocked it would do nothing at all;
/// - SIGHUP: reload (certificates, a config file);
/// - SIGUSR2: flip verbose logging (the reference's signal: Node reserves SIGUSR1);
/// - SIGUSR1, SIGPIPE: ignored (a write to a closed socket fails with EPIPE instead of killing us).
///
/// The handled signals must be blocked in every thread, or the kernel delivers them to one that
/// does not block them and the default action (exit) runs. Threads inherit their creator's mask,
/// so call `blockHandledSignals()` — or create the watcher — first thing in `main`, before any
/// event loop exists. (The chassis's own threads block every signal regardless.)
public final class SignalWatcher: Sendable {
    /// What each signal does; every handler runs on the watcher thread, one at a time.
    public struct Handlers: Sendable {
        /// SIGTERM, SIGINT or SIGQUIT, with which one; called at most once.
        public var shutdown: @Sendable (_ signal: Int32) -> Void
        /// SIGHUP, each time.
        public var reload: @Sendable () -> Void
        /// SIGUSR2, each time.
        public var toggleVerbose: @Sendable () -> Void

        /// Handlers for the signals; each defaults to doing nothing.
        public init(shutdown: @escaping @Sendable (_ signal: Int32) -> Void = { _ in },
                    reload: @escaping @Sendable () -> Void = {}, toggleVerbose: @escaping @Sendable () -> Void = {}) {
            self.shutdown = shutdown
            self.reload = reload
            self.toggleVerbose = toggleVerbose
        }
    }

    /// The signals the watcher takes. SIGUSR1 is among them only to be swallowed — and to wake
    /// the watcher when it is stopped.
    public static let handledSignals: [Int32] = [SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR2, SIGUSR1]

    private let handlers: Handlers
    private let thread: Locked<pthread_t?>
    private let stopping = Atomic(false)
    private let shutdownSignal = Atomic<Int32>(0)
    private let shutdownArrived = ThreadSemaphore()

    /// Blocks the handled signals in the calling thread (and so in every thread it creates after)
    /// and ignores SIGPIPE and SIGUSR1 process-wide. Idempotent.
    public static func blockHandledSignals() {
        // Ignored *and* blocked: a thread that predates the mask ignores SIGUSR1 instead of
        // dying of it, while a blocked SIGUSR1 still queues for the watcher's sigwait (Linux
        // never discards a blocked signal, whatever its disposition).
        signal(SIGPIPE, SIG_IGN)
        signal(SIGUSR1, SIG_IGN)
        var set = handledSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Blocks the handled signals (see `blockHandledSignals`) and starts the watcher thread.
    public init(handlers: Handlers) {
        Self.blockHandledSignals()
        self.handlers = handlers
        thread = Locked(nil)
        let started = DedicatedThread.start(name: "tether-signals") { [self] in watch() }
        thread.withLock { $0 = started }
        // Threads that predate the mask (an async `main`'s) would take the default action; a
        // handler sends what reaches them on to this thread.
        let forwarded: [Int32] = [SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR2]
        _ = forwarded.withUnsafeBufferPointer { tether_forward_signals(started, $0.baseAddress, Int32($0.count)) }
    }

    /// Blocks the caller until SIGTERM, SIGINT or SIGQUIT has arrived (and its handler has run); returns
    /// which. For a `main` that runs the shutdown itself.
    @discardableResult
    public func waitForShutdown() -> Int32 {
        shutdownArrived.wait()
        shutdownArrived.signal()
        return shutdownSignal.load(ordering: .acquiring)
    }

    /// The shutdown signal that arrived, or nil.
    public var shutdownRequested: Int32? {
        let signal = shutdownSignal.load(ordering: .acquiring)
        return signal == 0 ? nil : signal
    }

    /// Sends `signal` to the watcher thread alone, as the kernel would deliver a process-directed
    /// one: for tests, where other threads of the process may not block it.
    public func deliver(_ signal: Int32) {
        guard let thread = thread.withLock({ $0 }) else { return }
        pthread_kill(thread, signal)
    }

    /// Stops the watcher thread and joins it. The signals stay blocked: after this they wait,
    /// pending, rather than kill the process.
    public func stop() {
        guard let thread = thread.withLock({ state -> pthread_t? in defer { state = nil }; return state }) else { return }
        tether_forward_signals_stop()
        stopping.store(true, ordering: .releasing)
        pthread_kill(thread, SIGUSR1)
        pthread_join(thread, nil)
    }

    private func watch() {
        var set = Self.handledSet()
        var received: Int32 = 0
        while true {
            guard sigwait(&set, &received) == 0 else { continue }
            switch received {
            case SIGTERM, SIGINT, SIGQUIT:
                // Once: the first shutdown signal wins, later ones find the slot taken.
                guard shutdownSignal.compareExchange(expected: 0, desired: received, ordering: .acquiringAndReleasing).exchanged else { continue }
                handlers.shutdown(received)
                shutdownArrived.signal()
            case SIGHUP: handlers.reload()
            case SIGUSR2: handlers.toggleVerbose()
            default: if stopping.load(ordering: .acquiring) { return }
            }
        }
    }

    private static func handledSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handledSignals { sigaddset(&set, signal) }
        return set
    }
}
