import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// The process's open descriptors (/proc/self/fd) and threads (/proc/self/task) at one moment,
/// and the check that they came back to it.
struct ProcessResources {
    let descriptors: Int
    let threads: Int
    /// Thread names other than libdispatch's workers (named after their root queue's QoS),
    /// which come and go with whatever the test harness runs.
    let namedThreads: [String]

    /// What a closed call leaves, once it has all gone: no ICE thread left, and the descriptors
    /// and named threads the same over three polls 50 ms apart (a thread leaves /proc/self/task
    /// a moment after it is joined). The baseline the leak tests take after a warm-up call.
    static func settled(file: StaticString = #filePath, line: UInt = #line) -> ProcessResources {
        var previous: [ProcessResources] = []
        let settled = eventuallyValue("the warm-up's threads and descriptors gone", within: 10, poll: 0.05, file: file, line: line) { () -> ProcessResources? in
            let now = ProcessResources()
            previous = Array((previous + [now]).suffix(3))
            guard !threadNames.contains("tether-ice"), previous.count == 3,
                  previous.allSatisfy({ $0.descriptors == now.descriptors && $0.namedThreads == now.namedThreads }) else { return nil }
            return now
        }
        return settled ?? ProcessResources()
    }

    init() {
        descriptors = Self.descriptors
        threads = Self.threads
        namedThreads = Self.threadsNotDispatchWorkers
    }

    static func entries(_ directory: String) -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] }
    static var descriptors: Int { entries("/proc/self/fd").count }
    static var threads: Int { entries("/proc/self/task").count }

    static var descriptorTargets: [String] {
        entries("/proc/self/fd").map { $0 + "->" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) ?? "?") }.sorted()
    }

    static var threadNames: [String] {
        entries("/proc/self/task").compactMap {
            try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }.sorted()
    }

    static var threadsNotDispatchWorkers: [String] { threadNames.filter { !$0.contains("qos") } }

    /// Waits (up to 10 s: an exiting thread leaves /proc/self/task a moment after it is joined or
    /// detached) for the same number of descriptors, no thread that was not there, and no more
    /// threads in all (dispatch workers may have retired meanwhile); then asserts it.
    func assertReturned(file: StaticString = #filePath, line: UInt = #line) {
        _ = Eventually.holds(within: 10, every: 0.02) { Self.descriptors == descriptors && Self.threadsNotDispatchWorkers == namedThreads }
        XCTAssertEqual(Self.descriptors, descriptors, "open descriptors \(Self.descriptorTargets)", file: file, line: line)
        // Every thread but libdispatch's own workers: that pool grows under load and shrinks on
        // its own schedule (15 against 13 beside two busy loops), so its size says nothing here.
        XCTAssertEqual(Self.threadsNotDispatchWorkers, namedThreads, "threads: \(Self.threadNames)", file: file, line: line)
        XCTAssertFalse(Self.threadNames.contains("tether-ice"), file: file, line: line)
    }
}
