public import Foundation
import Glibc

extension Process {
    /// `run()`, with no signal blocked in the child. A child inherits the spawning thread's
    /// signal mask, and libdispatch's worker threads (where async tests and their tasks run)
    /// block nearly every signal: a fixture started there ignored `terminate()`'s SIGTERM and
    /// outlived its test.
    public func runWithSignalsUnblocked() throws {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try run()
    }
}
