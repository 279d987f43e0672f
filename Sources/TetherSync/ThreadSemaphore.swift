import Glibc

/// A counting semaphore for the chassis's own threads to sleep on (`Mutex` has no condition
/// variable). Posting is a single atomic add unless a thread is asleep on it.
final class ThreadSemaphore: @unchecked Sendable {
    // @unchecked: sem_t is thread-safe by POSIX; the pointer is allocated once and lives as long as the object.
    private let semaphore: UnsafeMutablePointer<sem_t>

    init(value: UInt32 = 0) {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, value)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func signal() { sem_post(semaphore) }

    func wait() {
        while sem_wait(semaphore) != 0, errno == EINTR {}
    }
}
