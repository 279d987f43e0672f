public import CTetherSystem
public import Glibc

/// Every thread Tether starts outside Swift concurrency: event loops, store lanes, the log
/// writer, the signal watcher, the APNs client, PostgreSQL's listener and canceller, the ICE
/// thread. One way to start them, so each is named and none can take a process-directed signal.
public enum DedicatedThread {
    /// Raised by a fault on the thread that faulted (a trap, a bad access, an arithmetic fault).
    public static let synchronousSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS]

    /// Starts `body` on a new thread with every asynchronous signal blocked, so a process-directed
    /// signal is never delivered to it: signals are taken only by `SignalWatcher`, synchronously.
    /// The signals a fault raises on the faulting thread (`synchronousSignals`) stay unblocked:
    /// blocking one is undefined by POSIX, and Linux then kills the process with the default
    /// action, before the Swift runtime can print where a trap or a bad access happened.
    ///
    /// - Parameters:
    ///   - name: what `top -H` and /proc show for the thread (Linux keeps 15 bytes).
    ///   - niceness: the thread's nice value, when it should yield to the loops under contention.
    ///   - joinable: false for a thread nobody joins (its resources go back when it ends).
    /// - Returns: the thread, for `pthread_join` when `joinable`.
    @discardableResult
    public static func start(name: String, niceness: Int32? = nil, joinable: Bool = true,
                             _ body: @escaping @Sendable () -> Void) -> pthread_t {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var all = sigset_t()
        sigfillset(&all)
        for signal in synchronousSignals { sigdelset(&all, signal) }
        var previous = sigset_t()
        // Block in the creator around pthread_create: the new thread inherits the mask from its
        // first instruction, with no window in which a signal could land on it.
        pthread_sigmask(SIG_BLOCK, &all, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        var handle = pthread_t()
        let context = Unmanaged.passRetained(Box {
            if let niceness { _ = tether_set_thread_nice(niceness) }
            _ = tether_set_thread_name(name)
            body()
        }).toOpaque()
        let status = pthread_create(&handle, nil, { context in
            Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
        precondition(status == 0, "pthread_create failed: \(status)")
        if !joinable { pthread_detach(handle) }
        return handle
    }
}
