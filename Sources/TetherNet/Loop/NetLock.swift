import TetherSync

/// A small lock for the few places that cross threads. A ``Locked` (a Synchronization.Mutex) underneath:
/// its storage has a stable address, where a `pthread_mutex_t` stored in a class property
/// would be passed to pthread by `&` — a temporary the language does not promise is the
/// property itself.
public final class NetLock: Sendable {
    private let mutex = Locked<Void>(())

    public init() {}

    @inline(__always)
    public func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        // The result leaves the lock as the caller's own value; the box only tells the
        // compiler so (Mutex wants a `sending` result, which a generic R cannot promise).
        try mutex.withLock { _ throws(E) -> UncheckedTransfer<R> in UncheckedTransfer(try body()) }.value
    }
}
