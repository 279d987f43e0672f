public import Synchronization
#if TETHER_TSAN
public import CTetherSystem
#endif

/// A value behind a lock: `Synchronization.Mutex`, and in a ThreadSanitizer build also the
/// happens-before edges the sanitizer cannot see for itself.
///
/// Why not `Mutex` directly: on Linux a Mutex takes and gives its lock with atomics and futex
/// calls inside the uninstrumented standard library, so ThreadSanitizer sees two threads touch
/// the guarded value with nothing ordering them, and reports a race for every lock in the
/// process (a two-thread `Mutex<Int>` counter is enough). With `-Xswiftc -DTETHER_TSAN`
/// (`make check-tsan`) each critical section also tells the sanitizer it acquired and released
/// the lock, so a report is a real race again. Every other build compiles to the Mutex alone.
@frozen
public struct Locked<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>
    #if TETHER_TSAN
    // One byte per lock, only as a unique address for the annotations (the Mutex's own is not
    // reachable from a borrow without a copy the type forbids).
    @usableFromInline let token: UnsafeMutableRawPointer
    #endif

    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
        #if TETHER_TSAN
        token = .allocate(byteCount: 1, alignment: 1)
        #endif
    }

    #if TETHER_TSAN
    deinit { token.deallocate() }
    #endif

    /// Runs `body` with the value, holding the lock.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if TETHER_TSAN
        return try mutex.withLock { [token] (value: inout sending Value) throws(E) -> sending Result in
            __tsan_acquire(token)
            defer { __tsan_release(token) }
            return try body(&value)
        }
        #else
        return try mutex.withLock(body)
        #endif
    }
}

// The Mutex it wraps is Sendable for any value (it hands the value over under the lock); the
// token is written once, at init.
extension Locked: @unchecked Sendable where Value: ~Copyable {} // a Mutex hands its value over only under the lock
