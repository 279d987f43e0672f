import Foundation
@testable import TetherRTC
import XCTest

/// The ICE thread's mailbox against its own end: other threads post while it closes.
final class ICEThreadTests: XCTestCase {
    /// A post that schedules the drain touches the GLib context from the posting thread; the
    /// close it carries to the ICE thread can end the loop and free the context before that
    /// thread is done with it (a lock of freed memory, which corrupted the heap in the 200-call
    /// test). Under glibc's malloc checking beside a busy core, every run of these 20,000 rounds
    /// crashed before the fix, within seconds.
    func testJobsPostedFromOtherThreadsWhileTheThreadClosesRunOrAreRefusedAndNothingOutlivesTheContext() {
        for round in 0..<20_000 {
            let thread = ICEThread(name: "tether-ice-test")
            thread.start()
            let ran = Counter()
            let posters = DispatchGroup()
            for _ in 0..<2 {
                DispatchQueue.global().async(group: posters) {
                    var accepted = 0
                    while accepted < 64, thread.post({ ran.add() }) { accepted += 1 }
                    ran.accept(accepted)
                }
            }
            XCTAssertTrue(thread.close { finished in finished() })
            thread.join()
            posters.wait()
            XCTAssertEqual(ran.ran, ran.accepted, "round \(round): every accepted job ran before the thread ended")
            XCTAssertFalse(thread.post {}, "nothing is accepted once closed")
        }
    }

    final class Counter: @unchecked Sendable {  // `lock` guards both counts
        private let lock = NSLock()
        private var runs = 0, accepts = 0
        func add() { lock.withLock { runs += 1 } }
        func accept(_ count: Int) { lock.withLock { accepts += count } }
        var ran: Int { lock.withLock { runs } }
        var accepted: Int { lock.withLock { accepts } }
    }
}
