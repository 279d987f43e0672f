import Glibc

/// A counting semaphore for threads of Tether's own to sleep on (`Mutex` has no condition
/// variable): the log writer, the signal watcher, a caller waiting for a loop's answer. Posting is
/// a single atomic add unless a thread is asleep on it.
public final class ThreadSemaphore: @unchecked Sendable { // a sem_t, thread-safe by POSIX, allocated once
    private let semaphore: UnsafeMutablePointer<sem_t>

    public init(value: UInt32 = 0) {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, value)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    public func signal() { sem_post(semaphore) }

    public func wait() {
        while sem_wait(semaphore) != 0, errno == EINTR {}
    }
}
