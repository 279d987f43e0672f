import Dispatch
import TetherSync
import XCTest

final class LockedTests: XCTestCase {
    /// The case ThreadSanitizer reported for Swift's Mutex on Linux: under `make check-tsan` this
    /// test is the proof that a Locked value's critical sections are seen as ordered.
    func testIncrementsFromManyThreadsAreNeverLost() {
        final class Counter: Sendable { let value = Locked(0) }
        let counter = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.value.withLock { $0 += 1 } }
        }
        XCTAssertEqual(counter.value.withLock { $0 }, 80_000)
    }

    func testTheBodysResultAndTypedErrorLeaveTheLockAndTheValueKeepsItsChanges() {
        struct Refused: Error, Equatable {}
        let locked = Locked([1, 2])
        XCTAssertEqual(locked.withLock { values -> Int in
            values.append(3)
            return values.count
        }, 3)
        do throws(Refused) {
            try locked.withLock { (values) throws(Refused) in
                values.append(4)
                throw Refused()
            }
            XCTFail("the error did not leave the lock")
        } catch {
            XCTAssertEqual(error, Refused())
        }
        XCTAssertEqual(locked.withLock { $0 }, [1, 2, 3, 4], "a change made before the throw stays")
    }
}
