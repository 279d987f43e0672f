import Glibc
import TetherService
import TetherSync
import TetherTestSupport
import XCTest

final class SignalWatcherTests: XCTestCase {
    /// Records what the handlers saw, for the test thread to wait on.
    private final class Seen: Sendable {
        let events = Locked<[String]>([])
        func add(_ event: String) { events.withLock { $0.append(event) } }
        var all: [String] { events.withLock { $0 } }

        func wait(for count: Int, timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line) {
            eventually("\(count) handler calls (saw \(all))", within: timeout, poll: 0.001, file: file, line: line) { all.count >= count }
        }
    }

    private func watcher(_ seen: Seen) -> SignalWatcher {
        SignalWatcher(handlers: .init(shutdown: { seen.add("shutdown \($0 == SIGTERM ? "TERM" : "INT")") },
                                      reload: { seen.add("reload") },
                                      toggleVerbose: { seen.add("verbose") }))
    }

    func testSIGUSR2TogglesVerboseAndSIGHUPReloadsEachTime() {
        let seen = Seen()
        let watcher = watcher(seen)
        defer { watcher.stop() }
        watcher.deliver(SIGUSR2)
        seen.wait(for: 1)
        watcher.deliver(SIGHUP)
        seen.wait(for: 2)
        watcher.deliver(SIGUSR2)
        seen.wait(for: 3)
        watcher.deliver(SIGHUP)
        seen.wait(for: 4)
        XCTAssertEqual(seen.all, ["verbose", "reload", "verbose", "reload"])
    }

    func testTheFirstShutdownSignalShutsDownOnceAndLaterOnesAreIgnored() {
        let seen = Seen()
        let watcher = watcher(seen)
        defer { watcher.stop() }
        XCTAssertNil(watcher.shutdownRequested)
        watcher.deliver(SIGTERM)
        XCTAssertEqual(watcher.waitForShutdown(), SIGTERM)
        watcher.deliver(SIGINT)
        watcher.deliver(SIGTERM)
        watcher.deliver(SIGHUP)
        seen.wait(for: 2)
        usleep(20_000)   // must be a sleep: that the later signals do nothing is the check
        XCTAssertEqual(seen.all, ["shutdown TERM", "reload"])
        XCTAssertEqual(watcher.shutdownRequested, SIGTERM)
        XCTAssertEqual(watcher.waitForShutdown(), SIGTERM, "waiting again returns at once")
    }

    func testSIGINTIsAShutdownToo() {
        let seen = Seen()
        let watcher = watcher(seen)
        defer { watcher.stop() }
        watcher.deliver(SIGINT)
        XCTAssertEqual(watcher.waitForShutdown(), SIGINT)
        XCTAssertEqual(seen.all, ["shutdown INT"])
    }

    func testSIGUSR1IsSwallowedAndSIGPIPEAndSIGUSR1AreIgnored() {
        let seen = Seen()
        let watcher = watcher(seen)
        defer { watcher.stop() }
        watcher.deliver(SIGUSR1)
        watcher.deliver(SIGUSR2)
        seen.wait(for: 1)
        XCTAssertEqual(seen.all, ["verbose"], "SIGUSR1 did nothing, and the watcher still runs")
        for signal in [SIGPIPE, SIGUSR1] {
            var action = sigaction()
            sigaction(signal, nil, &action)
            XCTAssertEqual(unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self), 1, "SIG_IGN for \(signal)")
        }
    }

    func testTheHandledSignalsAreBlockedInTheCreatingThread() {
        let watcher = SignalWatcher(handlers: .init())
        defer { watcher.stop() }
        var mask = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &mask)
        for signal in SignalWatcher.handledSignals { XCTAssertEqual(sigismember(&mask, signal), 1, "\(signal)") }
    }

    func testStopJoinsTheWatcherAndIsIdempotent() {
        let watcher = SignalWatcher(handlers: .init())
        watcher.stop()
        watcher.stop()
        watcher.deliver(SIGUSR2)
    }
}
