public import CTetherSystem
public import Glibc

/// A thread of a service's own (the log writer, the signal watcher, the APNs client), outside every event loop.
public enum DedicatedThread {
    /// Starts `body` on a new joinable thread with every signal blocked, so a process-directed signal is never delivered to it — signals
    /// are taken only by `SignalWatcher`, synchronously.
    /// `name` (Linux keeps 15 bytes) is what `top -H` and /proc show for the thread.
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) -> pthread_t {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var all = sigset_t()
        sigfillset(&all)
        var previous = sigset_t()
        // Block in the creator around pthread_create: the new thread inherits the mask from its
        // first instruction, with no window in which a signal could land on it.
        pthread_sigmask(SIG_BLOCK, &all, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        var handle = pthread_t()
        let context = Unmanaged.passRetained(Box {
            _ = tether_set_thread_name(name)
            body()
        }).toOpaque()
        let status = pthread_create(&handle, nil, { context in
            Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
        precondition(status == 0, "pthread_create failed: \(status)")
        return handle
    }
}
