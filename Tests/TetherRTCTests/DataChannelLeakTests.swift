import Foundation
@testable import TetherRTC
import TetherTestSupport
import XCTest

/// Associations leave nothing behind once closed: no registry entry, no object, no thread, no
/// file descriptor. usrsctp's iterator thread and the timer thread exist once per process.
final class DataChannelLeakTests: XCTestCase {
    func entries(_ directory: String) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: directory).count) ?? -1
    }

    func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// One pair opened, used and closed; returns whether both ends are gone since.
    func runPair() throws -> (() -> Bool) {
        let pair = try AssociationPair()
        pair.waitUntilOpen()
        try pair.a.send([1, 2, 3])
        eventually("a message", within: rtcPatience, poll: 0.002) { pair.logB.messages == [[1, 2, 3]] }
        pair.close()
        weak let a = pair.a, b = pair.b
        return { a == nil && b == nil }
    }

    func testTwoHundredAssociationsOpenedAndClosedLeaveNoThreadsDescriptorsOrObjects() throws {
        // The first pair brings usrsctp up and warms the dispatch pool; count from there.
        let warm = try runPair()
        eventually("the warm-up pair gone", within: rtcPatience, poll: 0.002) { warm() && SCTPRegistry.count == 0 }
        let descriptors = entries("/proc/self/fd"), threads = entries("/proc/self/task")
        XCTAssertEqual(threadNames().filter { $0 == "sctp-timer" }.count, 1, "one timer thread for the process")
        XCTAssertEqual(threadNames().filter { $0 == "SCTP iterator" }.count, 1)

        var gone: [() -> Bool] = []
        for _ in 0..<100 { gone.append(try runPair()) }
        eventually("every association released", within: 30, poll: 0.002) { SCTPRegistry.count == 0 && gone.allSatisfy { $0() } }
        // Idle dispatch workers retire on their own schedule.
        eventually("threads back to \(threads)", within: 30, poll: 0.002) { entries("/proc/self/task") <= threads }
        eventually("descriptors back to \(descriptors)", within: rtcPatience, poll: 0.002) { entries("/proc/self/fd") <= descriptors }
        XCTAssertEqual(threadNames().filter { $0 == "sctp-timer" }.count, 1)
    }
}
