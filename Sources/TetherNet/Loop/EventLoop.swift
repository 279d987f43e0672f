import CTetherSystem
import Glibc
import Synchronization
import TetherSync

/// Something registered with a loop for readiness events. Called only on the loop's thread.
public protocol EventLoopHandler: AnyObject {
    func readable()
    func writable()
    /// EPOLLHUP or EPOLLERR with nothing left to read.
    func hangup()
}

/// One epoll set driven by one thread.
///
/// Everything except `execute`, `submitAndWait`, `shutdown` and `inEventLoop` is confined to the
/// loop: handlers, timers and connections are touched only on its thread (`assertInEventLoop`
/// states the rule exactly and checks it in debug builds). A connection moves between loops
/// only through an explicit handoff (`Transport.handoff`).
public final class EventLoop: @unchecked Sendable {   // confined state is touched on one thread; `pending` is locked
    public let index: Int
    public let clock: any NetClock
    private let epoll: Int32
    private let wakeFD: Int32
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    /// Handlers in slots; a token is (generation << 32 | slot), so an event for a slot that has
    /// since been reused is recognised as stale. An array slot costs 16 bytes where a dictionary
    /// entry costs several times that, for every connection.
    @exclusivity(unchecked) private var slots: [(generation: UInt32, handler: (any EventLoopHandler)?)] = []
    @exclusivity(unchecked) private var freeSlots: [Int] = []
    @exclusivity(unchecked) private var liveHandlers = 0
    @exclusivity(unchecked) private var timers = TimerQueue<TimerTask>()
    private let pending = Locked<[@Sendable () -> Void]>([])
    @exclusivity(unchecked) private var stopping = false
    /// Keepalive sweeps by interval (loop thread only).
    @exclusivity(unchecked) var sweeps: [Duration: KeepaliveSweep] = [:]
    /// Writers that gathered output since the last flush point (the end of an iteration, or
    /// between two of its events once handlers have run `flushBudget`); a writer that leaves
    /// the loop (a handoff) clears its own slot.
    @exclusivity(unchecked) private var pendingFlushes: [(any FlushPointWriter)?] = []
    /// Work that must wait until the iteration's writes are out and no handler is running (a
    /// handoff's transfer to another loop).
    @exclusivity(unchecked) private var flushPointTasks: [() -> Void] = []
    /// The thread `start()` made, for `shutdown` to join (touched by the starting thread).
    @exclusivity(unchecked) private var thread: pthread_t?
    /// The thread inside `run()`, 0 while none is.
    private let runner = Atomic<UInt>(0)
    /// From `start()` until its thread leaves `run()`: the loop is promised to that thread.
    private let started = Atomic<Bool>(false)
    /// One read buffer per loop, lent to whichever connection is readable: an idle connection
    /// owns no read buffer at all.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// The same for decrypted TLS data, which is read while the ciphertext buffer is in use.
    let plaintextBuffer: UnsafeMutableRawBufferPointer
    /// Where a TLS connection gathers an iteration's small writes into one `SSL_write`;
    /// allocated by the first TLS flush, so a loop without TLS never has one.
    @exclusivity(unchecked) private var tlsGatherStorage: UnsafeMutableRawBufferPointer?

    /// A timer's work; it runs on the loop that scheduled it.
    public struct TimerTask {
        let body: () -> Void
    }

    public typealias TimerID = TimerQueue<TimerTask>.ID

    public static let readBufferSize = 64 * 1024
    static let wakeToken: UInt64 = 0

    public init(index: Int = 0, clock: any NetClock = MonotonicClock()) throws {
        self.index = index
        self.clock = clock
        epoll = tether_epoll_create()
        wakeFD = tether_eventfd_create()
        guard epoll >= 0, wakeFD >= 0 else { throw NetError.system("epoll/eventfd", errno) }
        guard tether_epoll_add(epoll, wakeFD, UInt32(TETHER_EPOLLIN), Self.wakeToken) == 0 else { throw NetError.system("epoll_ctl", errno) }
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        plaintextBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
    }

    deinit {
        close(epoll)
        close(wakeFD)
        readBuffer.deallocate()
        plaintextBuffer.deallocate()
        tlsGatherStorage?.deallocate()
    }

    /// See `tlsGatherStorage`: one TLS record's worth of plaintext is 16 KiB, so this is four.
    var tlsGatherBuffer: UnsafeMutableRawBufferPointer {
        if let tlsGatherStorage { return tlsGatherStorage }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readBufferSize, alignment: 16)
        tlsGatherStorage = buffer
        return buffer
    }

    // MARK: Threads

    /// Starts the loop on a new thread.
    public func start() {
        started.store(true, ordering: .releasing)
        // Named for `top -H` and /proc/PID/task/*/comm: an operator sees each loop's share.
        thread = DedicatedThread.start(name: "tether-loop-\(index)") { [self] in run() }
    }

    /// True on the thread running the loop.
    public var inEventLoop: Bool { runner.load(ordering: .acquiring) == pthread_self() }

    /// Debug builds: traps unless the calling thread may touch this loop's confined state
    /// (its handlers, timers, connections). That is the thread inside `run()` while one is;
    /// while none is — before `start()` or a manual `run()`, and after `run()` returns — the
    /// loop belongs to whoever holds it, so set-up code and tests that drive a loop they never
    /// start (`runTimers()` on a `ManualClock`) pass. Between `start()` and its thread entering
    /// `run()` the loop is already promised to that thread, and every other caller traps.
    /// Release builds: compiled out.
    @inline(__always)
    public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(isConfinedToCurrentThread, "called off the thread of loop \(index)", file: file, line: line)
    }

    /// Whether the calling thread may touch this loop's confined state: the rule
    /// `assertInEventLoop` checks, in every build.
    public var isConfinedToCurrentThread: Bool {
        let runner = runner.load(ordering: .acquiring)
        if runner != 0 { return runner == pthread_self() }
        return !started.load(ordering: .acquiring)
    }

    /// Runs `task` on the loop thread (soon, in submission order). Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let first = pending.withLock { pending -> Bool in
            pending.append(task)
            return pending.count == 1
        }
        // Only a task that finds the queue empty has to wake the loop: a non-empty queue has
        // already been signalled, or the loop left it non-empty and will not block before running
        // it (`waitTimeout` checks the queue). One syscall per burst, not per task.
        if first { _ = tether_eventfd_signal(wakeFD) }
    }

    /// Asks the loop to stop after its current iteration; joins the thread if one was started.
    public func shutdown() {
        execute { [self] in stopping = true }
        if let thread, !inEventLoop {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    /// The loop body: runs until `shutdown`.
    public func run() {
        runner.store(pthread_self(), ordering: .releasing)
        defer {
            runner.store(0, ordering: .releasing)
            started.store(false, ordering: .releasing)
        }
        var events = [tether_epoll_event](repeating: tether_epoll_event(), count: 256)
        while !stopping {
            let timeout = waitTimeout()
            let count = events.withUnsafeMutableBufferPointer { tether_epoll_wait(epoll, $0.baseAddress, Int32($0.count), timeout) }
            if count < 0, errno != EINTR { fatalError("epoll_wait failed: \(errno)") }
            var flushedAt = clock.now()
            for i in 0..<max(0, Int(count)) {
                let event = events[i]
                if event.data == Self.wakeToken {
                    var value: UInt64 = 0
                    _ = tether_eventfd_drain(wakeFD, &value)
                    continue
                }
                dispatch(event)
                if clock.now().elapsed(since: flushedAt) >= Self.flushBudget {
                    // Tasks get as long as the events just had, so neither starves the other.
                    runPending(until: clock.now() + Self.flushBudget)
                    flushWrites()
                    flushedAt = clock.now()
                }
            }
            runPending()
            runTimers()
            flushWrites()
        }
        while pending.withLock({ !$0.isEmpty }) { runPending(limit: .max) }
        flushWrites()
    }

    // MARK: Flush point (loop thread only)

    /// Asks for `writer.flushScheduledWrites()` at the next flush point; returns the
    /// slot `cancelFlush` takes. Call at most once per writer per flush.
    func scheduleFlush(_ writer: any FlushPointWriter) -> Int {
        assertInEventLoop()
        pendingFlushes.append(writer)
        return pendingFlushes.count - 1
    }

    /// Withdraws a flush scheduled and not yet run (the writer is leaving this loop).
    func cancelFlush(slot: Int, of writer: any FlushPointWriter) {
        assertInEventLoop()
        assert(slot < pendingFlushes.count && pendingFlushes[slot] === writer, "cancelFlush of a flush that is not pending")
        pendingFlushes[slot] = nil
    }

    /// Runs `task` at the next flush point, after the writes: by then the handler that asked,
    /// and every other handler that ran before that point, has returned (a server batches work
    /// there: one wake of a worker thread for everything queued since the last flush point).
    public func atFlushPoint(_ task: @escaping () -> Void) {
        assertInEventLoop()
        flushPointTasks.append(task)
    }

    /// Sends what every writer gathered since the last flush point (one `writev` or `SSL_write` each),
    /// then runs the flush-point tasks. Writers scheduled meanwhile are flushed in the same pass.
    private func flushWrites() {
        repeat {
            var i = 0
            while i < pendingFlushes.count {
                let writer = pendingFlushes[i]
                pendingFlushes[i] = nil
                i += 1
                writer?.flushScheduledWrites()
            }
            // Keep a modest array for the next iteration; a burst's worth is released.
            pendingFlushes.removeAll(keepingCapacity: pendingFlushes.count <= Self.retainedFlushSlots)
            let tasks = flushPointTasks
            flushPointTasks = []
            for task in tasks { task() }
        } while !pendingFlushes.isEmpty || !flushPointTasks.isEmpty
    }

    /// Flush slots kept allocated between iterations (16 bytes each).
    static let retainedFlushSlots = 1024

    private func waitTimeout() -> Int32 {
        if !pendingFlushes.isEmpty || !flushPointTasks.isEmpty || pending.withLock({ !$0.isEmpty }) { return 0 }
        guard let deadline = timers.nextDeadline() else { return -1 }
        let now = clock.now()
        guard deadline > now else { return 0 }
        // Round up so a timer never fires early; cap to keep the arithmetic in range.
        return Int32(min((deadline.nanoseconds - now.nanoseconds + 999_999) / 1_000_000, 60_000))
    }

    private func handler(for token: UInt64) -> (any EventLoopHandler)? {
        let slot = Int(token & 0xFFFF_FFFF) - 1
        guard slot >= 0, slot < slots.count, slots[slot].generation == UInt32(token >> 32) else { return nil }
        return slots[slot].handler
    }

    private func dispatch(_ event: tether_epoll_event) {
        guard let handler = handler(for: event.data) else { return }
        let flags = event.events
        if flags & UInt32(TETHER_EPOLLIN) != 0 { handler.readable() }
        // The read may have closed and deregistered the handler.
        guard self.handler(for: event.data) != nil else { return }
        if flags & UInt32(TETHER_EPOLLOUT) != 0 { handler.writable() }
        guard self.handler(for: event.data) != nil else { return }
        if flags & UInt32(TETHER_EPOLLHUP | TETHER_EPOLLERR) != 0, flags & UInt32(TETHER_EPOLLIN) == 0 { handler.hangup() }
    }

    /// Time spent dispatching one batch's events after which the loop stops to run queued tasks
    /// (for as long again, at most `maxTasksPerIteration` of them) and flush what was written,
    /// before it dispatches the rest. Writes otherwise wait for the end of the iteration: with 256 events
    /// and a handler that verifies a signature per message (the signaling server, about 50 µs
    /// each), that held a forwarded signal for tens of milliseconds. Cheap handlers (the relay's
    /// splice, a few µs a frame) seldom reach it, so they mostly keep one `writev` per connection
    /// per iteration.
    public static let flushBudget: Duration = .milliseconds(1)

    /// Tasks run per iteration before the loop looks at its sockets again. A burst of queued work
    /// (thousands of storage answers after a reconnect storm, each an admission of a few hundred
    /// microseconds) would otherwise hold every spliced socket of the loop for as long as the
    /// whole burst takes; 64 keeps an iteration's queued work to milliseconds while a burst still
    /// drains at thousands of tasks a second.
    public static let maxTasksPerIteration = 64

    /// Runs queued tasks, at most `limit` of them and, given a `deadline`, none once it has
    /// passed: the rest go back to the front of the queue in their order (one sender's signals
    /// stay in order) and wait for the next pass or iteration, which then does not block in
    /// epoll_wait.
    private func runPending(limit: Int = EventLoop.maxTasksPerIteration, until deadline: MonotonicInstant? = nil) {
        let tasks = pending.withLock { pending -> [@Sendable () -> Void] in
            guard pending.count > limit else {
                defer { pending = [] }
                return pending
            }
            defer { pending.removeFirst(limit) }
            return Array(pending.prefix(limit))
        }
        for (index, task) in tasks.enumerated() {
            task()
            if let deadline, index + 1 < tasks.count, clock.now() >= deadline {
                pending.withLock { $0.insert(contentsOf: tasks[(index + 1)...], at: 0) }
                return
            }
        }
    }

    /// Fires every due timer (also callable by tests driving a `ManualClock`).
    public func runTimers() {
        assertInEventLoop()
        for task in timers.popExpired(now: clock.now()) { task.body() }
    }

    // MARK: Registration (loop thread only)

    /// Registers `fd` for `events`; returns the token that identifies it.
    func register(fd: Int32, events: UInt32, handler: any EventLoopHandler) throws -> UInt64 {
        assertInEventLoop()
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = slots.count
            slots.append((0, nil))
        }
        // Slot numbers start at 1: token 0 is the wake-up eventfd.
        let token = UInt64(slots[slot].generation) << 32 | UInt64(slot + 1)
        guard tether_epoll_add(epoll, fd, events, token) == 0 else {
            freeSlots.append(slot)
            throw NetError.system("epoll_ctl(ADD)", errno)
        }
        slots[slot].handler = handler
        liveHandlers += 1
        return token
    }

    func modify(fd: Int32, token: UInt64, events: UInt32) {
        assertInEventLoop()
        _ = tether_epoll_modify(epoll, fd, events, token)
    }

    func deregister(fd: Int32, token: UInt64) {
        assertInEventLoop()
        _ = tether_epoll_remove(epoll, fd)
        release(token: token)
    }

    /// Frees `token`'s slot without touching the epoll set: for a descriptor about to be closed,
    /// which close(2) removes from the set by itself (Tether never duplicates a socket). An event
    /// already fetched for it finds the slot's generation moved on and is dropped.
    func release(token: UInt64) {
        assertInEventLoop()
        let slot = Int(token & 0xFFFF_FFFF) - 1
        guard slot >= 0, slot < slots.count, slots[slot].generation == UInt32(token >> 32), slots[slot].handler != nil else { return }
        slots[slot].handler = nil
        slots[slot].generation &+= 1
        freeSlots.append(slot)
        liveHandlers -= 1
    }

    /// Registered handlers (for tests and metrics).
    public var registeredCount: Int { liveHandlers }

    // MARK: Timers (loop thread only)

    /// Runs `body` once `delay` has passed, on this loop.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> TimerID {
        assertInEventLoop()
        return timers.schedule(at: clock.now() + delay, TimerTask(body: body))
    }

    public func cancel(_ timer: TimerID) {
        assertInEventLoop()
        timers.cancel(timer)
    }
}

/// Something that gathers writes during a loop iteration and sends them once, at the loop's
/// flush point (`EventLoop.scheduleFlush`): a TCP connection's `writev`, a TLS connection's
/// `SSL_write`, an in-memory transport's delivery.
protocol FlushPointWriter: AnyObject {
    func flushScheduledWrites()
}

/// Failures of the network layer.
public enum NetError: Error, Equatable, Sendable, CustomStringConvertible {
    case system(String, Int32)
    case invalidAddress(String)
    /// The host name did not resolve (DNS), with the resolver's reason.
    case unresolved(host: String, reason: String)
    /// Another process listens on the address (a second server on a taken port).
    case addressInUse(String)
    case closed
    case timedOut
    case tls(String)
    /// The caller cancelled the exchange.
    case cancelled
    /// The answer was larger than the caller's bound.
    case responseTooLarge

    public var description: String {
        switch self {
        case let .system(call, code): "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        case let .invalidAddress(text): "invalid address \(text)"
        case let .unresolved(host, reason): "cannot resolve \(host): \(reason) (check the host name in the URL)"
        case let .addressInUse(address): "\(address) is already in use by another process (another server on this port?)"
        case .closed: "connection closed"
        case .timedOut: "timed out"
        case let .tls(reason): "TLS: \(reason)"
        case .cancelled: "cancelled"
        case .responseTooLarge: "response too large"
        }
    }
}
