import Glibc
import TetherSync
import XCTest

/// The one way Tether starts a thread: named, deaf to process-directed signals, and still able
/// to report its own faults.
final class DedicatedThreadTests: XCTestCase {
    /// The new thread's signal mask, read on the thread itself.
    private func maskOfANewThread() -> sigset_t {
        let seen = Locked<sigset_t?>(nil)
        let done = ThreadSemaphore()
        let thread = DedicatedThread.start(name: "tether-test") {
            var mask = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &mask)
            seen.withLock { $0 = mask }
            done.signal()
        }
        done.wait()
        pthread_join(thread, nil)
        return seen.withLock { $0! }
    }

    func testProcessDirectedSignalsAreBlockedOnTheNewThread() {
        var mask = maskOfANewThread()
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGQUIT] {
            XCTAssertEqual(sigismember(&mask, signal), 1, "signal \(signal) is left to the signal watcher")
        }
    }

    func testTheSignalsAFaultRaisesStayUnblockedSoATrapStillReportsWhereItHappened() {
        var mask = maskOfANewThread()
        for signal in DedicatedThread.synchronousSignals {
            XCTAssertEqual(sigismember(&mask, signal), 0, "signal \(signal) reaches the runtime's handler")
        }
    }

    func testTheCreatorsOwnMaskIsUnchanged() {
        var before = sigset_t(), after = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &before)
        _ = maskOfANewThread()
        pthread_sigmask(SIG_BLOCK, nil, &after)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGUSR1] {
            XCTAssertEqual(sigismember(&before, signal), sigismember(&after, signal))
        }
    }
}
