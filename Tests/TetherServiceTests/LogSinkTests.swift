import Glibc
import Synchronization
@testable import TetherService
import TetherSync
import TetherTestSupport
import XCTest

/// An output that records every call, and can be stalled like a stuck standard error.
final class RecordingOutput: Sendable {
    private let lines = Locked<[String]>([])
    private let gate = Locked(true)
    private let stalled = Atomic<Int>(0)

    var write: @Sendable ([UInt8]) -> Void {
        { [self] bytes in
            while !gate.withLock({ $0 }) {
                stalled.store(1, ordering: .relaxed)
                usleep(1_000)   // must be a sleep: this is the stuck output, blocking its writer
            }
            calls.add(1, ordering: .relaxed)
            // One call carries one or more whole lines.
            XCTAssertEqual(bytes.last, 0x0A)
            let text = String(decoding: bytes, as: UTF8.self)
            lines.withLock { $0 += text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { $0 + "\n" } }
        }
    }

    private let calls = Atomic<Int>(0)
    var callCount: Int { calls.load(ordering: .relaxed) }

    func stall() { gate.withLock { $0 = false } }
    func resume() { gate.withLock { $0 = true } }
    var isStalled: Bool { stalled.load(ordering: .relaxed) == 1 }
    var all: [String] { lines.withLock { $0 } }
}

final class LogSinkTests: XCTestCase {
    func testLinesAreWrittenWholeInOrderAndABurstGoesOutInFewWrites() {
        let output = RecordingOutput()
        let sink = LogSink(name: "relay", linger: .milliseconds(50), output: output.write)
        for i in 0..<100 { sink.log("relay abcd1234 connect \(i)") }
        sink.flush()
        XCTAssertEqual(output.all, (0..<100).map { "relay abcd1234 connect \($0)\n" })
        // 100 lines of ~26 bytes fit one pipe-atomic write; the first may have gone alone.
        XCTAssertLessThanOrEqual(output.callCount, 2)
        sink.close()
    }

    func testABatchIsCutAtLineBoundariesIntoPipeAtomicWrites() {
        let lines = (0..<400).map { Array("relay abcd1234 admit role=mac via=open peer=false \($0)\n".utf8) }
        let chunks = LogSink.writes(of: lines)
        XCTAssertGreaterThan(chunks.count, 1)
        XCTAssertTrue(chunks.allSatisfy { $0.count <= LogSink.atomicWriteLimit && $0.last == 0x0A })
        XCTAssertEqual(chunks.flatMap { $0 }, lines.flatMap { $0 })
        let long = [UInt8](repeating: 0x41, count: 10_000) + [0x0A]
        XCTAssertEqual(LogSink.writes(of: [lines[0], long, lines[1]]), [lines[0], long, lines[1]], "a long line is a write of its own")
    }

    func testTextCannotForgeALineOfItsOwn() {
        let output = RecordingOutput()
        let sink = LogSink(name: "relay", output: output.write)
        sink.log("relay x teardown\nrelay: forged line\r\u{1B}[2J")
        sink.close()
        XCTAssertEqual(output.all, ["relay x teardown relay: forged line  [2J\n"])
    }

    func testASlowOutputNeverBlocksTheLoggerAndOverflowIsDroppedCountedAndReportedOnceSpaceReturns() throws {
        let output = RecordingOutput()
        let sink = LogSink(name: "relay", capacity: 10, output: output.write)
        output.stall()
        sink.log("first")
        eventually("the writer is stuck in the output", within: 5, poll: 0.001) { output.isStalled }
        // The writer is stuck inside the output with "first"; the queue holds 10 more.
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for i in 0..<50 { sink.log("line \(i)") }
        }
        XCTAssertLessThan(elapsed, .milliseconds(500), "log() returned without waiting for the output")
        XCTAssertEqual(sink.droppedLines, 40)
        output.resume()
        sink.flush()
        XCTAssertEqual(output.all, ["first\n"] + (0..<10).map { "line \($0)\n" } + ["relay: 40 log lines dropped: standard error was too slow\n"])
        sink.log("after")
        sink.flush()
        XCTAssertEqual(output.all.last, "after\n", "the report is made once")
        XCTAssertEqual(sink.droppedLines, 40, "the metric keeps the total")
        sink.close()
    }

    func testVerboseLinesAreWrittenOnlyWhileVerboseAndNotEvenBuiltOtherwise() {
        let output = RecordingOutput()
        let sink = LogSink(name: "relay", output: output.write)
        let built = Atomic<Int>(0)
        func line() -> String {
            built.add(1, ordering: .relaxed)
            return "relay x hello role=mac"
        }
        sink.diagnostic(line())
        XCTAssertTrue(sink.toggleVerbose())
        sink.diagnostic(line())
        XCTAssertFalse(sink.toggleVerbose(reason: "test"))
        sink.diagnostic(line())
        sink.close()
        XCTAssertEqual(built.load(ordering: .relaxed), 1)
        XCTAssertEqual(output.all, ["relay: verbose logging on (SIGUSR2)\n", "relay x hello role=mac\n", "relay: verbose logging off (test)\n"])
    }

    func testCloseWritesEverythingQueuedAndLaterLinesAreWrittenAtOnce() {
        let output = RecordingOutput()
        let sink = LogSink(name: "relay", output: output.write)
        for i in 0..<20 { sink.log("\(i)") }
        sink.close()
        XCTAssertEqual(output.all.count, 20)
        sink.log("relay: shutting down")
        XCTAssertEqual(output.all.last, "relay: shutting down\n")
        sink.close()
    }

    func testTheDefaultOutputWritesWholeLinesToTheDescriptor() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]) }
        let descriptor = fds[1]
        let sink = LogSink(name: "relay") { LogSink.write($0, to: descriptor) }
        sink.log("relay: listening")
        sink.log("relay: shutting down")
        sink.close()
        close(fds[1])
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(fds[0], &buffer, buffer.count)
        XCTAssertEqual(String(decoding: buffer[0..<max(0, count)], as: UTF8.self), "relay: listening\nrelay: shutting down\n")
    }
}
