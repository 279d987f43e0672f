import CNice
import CTetherNice
import Glibc
import TetherSync

/// One agent's own thread, running a GLib main loop on a private main context: libnice's
/// sockets, timers and signals live there, never on a Tether event loop. Other threads hand it
/// work through a mailbox that one idle source drains in order, so jobs posted from any thread
/// run one at a time, first in first out, and never inside a libnice call already on the stack
/// (`g_main_context_invoke` would run them inline when posted from this thread).
final class ICEThread: @unchecked Sendable { // immutable GLib pointers whose calls used here are thread-safe; the mailbox is locked
    // @unchecked: the pointers never change, GLib's context and loop calls used here are
    // thread-safe, and everything mutable is behind the mailbox's mutex.
    let context: OpaquePointer
    private let loop: OpaquePointer
    private let name: String
    private let mailbox = Locked(Mailbox())
    private let handle = Locked<pthread_t?>(nil)

    private struct Mailbox {
        var jobs: [@Sendable () -> Void] = []
        var scheduled = false
        /// No job is accepted once the final one (the teardown) is in.
        var closed = false
        /// Set when the thread was closed from itself and so cannot be joined.
        var detachAtExit = false
    }

    init(name: String) {
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        self.name = name
    }

    func start() {
        let thread = DedicatedThread.start(name: name) { [self] in run() }
        handle.withLock { $0 = thread }
    }

    private func run() {
        g_main_context_push_thread_default(context)
        g_main_loop_run(loop)
        g_main_context_pop_thread_default(context)
        g_main_loop_unref(loop)
        // Destroys every source still attached (a mailbox source that never ran among them,
        // releasing what it holds), unless a posting thread still holds the context for a
        // moment (`attachDrain`); the agent, which held another reference, is gone by now.
        g_main_context_unref(context)
        let detach = mailbox.withLock { state in
            state.jobs.removeAll()
            return state.detachAtExit
        }
        if detach { pthread_detach(pthread_self()) }
    }

    /// True on this thread. (Not `g_main_context_is_owner`: the context is gone once the thread ended.)
    var isCurrent: Bool {
        guard let thread = handle.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Queues `job` for the thread; false (and the job dropped) once closed.
    @discardableResult
    func post(_ job: @escaping @Sendable () -> Void) -> Bool {
        enqueue(job, final: false)
    }

    /// Queues the last job. `teardown` gets a function to call once everything it releases is
    /// released; that ends the loop and the thread. False if already closed.
    func close(_ teardown: @escaping @Sendable (_ finished: @escaping @Sendable () -> Void) -> Void) -> Bool {
        let loop = UncheckedPointer(loop)
        return enqueue({ teardown { g_main_loop_quit(loop.pointer) } }, final: true)
    }

    /// Waits for the thread to end; when called from the thread itself (an owner closing from
    /// inside its handler), the thread detaches itself instead.
    func join() {
        if isCurrent {
            mailbox.withLock { $0.detachAtExit = true }
            return
        }
        guard let thread = handle.withLock({ $0 }) else { return }
        pthread_join(thread, nil)
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void, final: Bool) -> Bool {
        let schedule: Bool? = mailbox.withLock { state in
            guard !state.closed else { return nil }
            state.closed = final
            state.jobs.append(job)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard let schedule else { return false }
        // The context is alive here: it is released only after the final job ran, which only a
        // drain runs, and with `schedule` no drain is pending but the one attached below.
        if schedule { attachDrain() }
        return true
    }

    /// Runs on the posting thread. The drain attached here may run the final job, end the loop
    /// and release the context on the ICE thread before this thread is back from
    /// `g_source_attach`; `g_source_unref` after it still locks the source's context. So this
    /// thread holds its own reference on the context from before the attach until after that
    /// unref (the context is alive on entry: see `enqueue`), and whichever thread lets go last
    /// frees it. Without it, the lock was taken in freed memory and corrupted the heap.
    private func attachDrain() {
        g_main_context_ref(context)
        defer { g_main_context_unref(context) }
        let source = g_idle_source_new()
        g_source_set_callback(source, { data in
            Unmanaged<ICEThread>.fromOpaque(data!).takeUnretainedValue().drain()
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passRetained(self).toOpaque(), { data in
            Unmanaged<ICEThread>.fromOpaque(data!).release()
        })
        g_source_attach(source, context)
        g_source_unref(source)
    }

    private func drain() {
        let jobs = mailbox.withLock { state in
            state.scheduled = false
            defer { state.jobs.removeAll(keepingCapacity: true) }
            return state.jobs
        }
        for job in jobs { job() }
    }
}

/// A C pointer carried into a `@Sendable` job that only ever runs on the ICE thread.
struct UncheckedPointer: @unchecked Sendable { // a libnice pointer used only by jobs on the ICE thread
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}
