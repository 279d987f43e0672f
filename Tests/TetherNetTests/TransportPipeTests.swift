import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

final class TransportPipeTests: XCTestCase {
    private var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    /// client ⇄ (pipe) ⇄ owner, in memory: the pipe joins the two inner ends.
    private func piped(finished: Locked<Int>) throws -> UncheckedBox<(client: InMemoryTransport, owner: InMemoryTransport)> {
        let loop = group.loops[0]
        let (client, near) = InMemoryTransport.pair(loop)
        let (far, owner) = InMemoryTransport.pair(loop)
        let ends = UncheckedBox((near, far))
        try loop.submitAndWait {
            _ = TransportPipe(ends.value.0, ends.value.1) { _ in finished.mutate { $0 += 1 } }
        }
        return UncheckedBox((client, owner))
    }

    func testBytesCrossThePipeEachWayUntouched() throws {
        let finished = Locked(0)
        let ends = try piped(finished: finished)
        let clientLog = TransportLog(), ownerLog = TransportLog()
        let loop = group.loops[0]
        let upstream = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try loop.submitAndWait {
            ends.value.client.delegate = clientLog
            ends.value.owner.delegate = ownerLog
            ends.value.client.write(upstream)
            ends.value.owner.write(Array("answer".utf8))
        }
        XCTAssertTrue(ownerLog.waitForBytes(upstream.count))
        XCTAssertEqual(ownerLog.bytes.value, upstream)
        XCTAssertTrue(clientLog.waitForBytes(6))
        XCTAssertEqual(String(decoding: clientLog.bytes.value, as: UTF8.self), "answer")
    }

    func testAnOwnerThatClosesClosesTheClientAfterWhatItSentAndThePipeFinishesOnce() throws {
        let finished = Locked(0)
        let ends = try piped(finished: finished)
        let clientLog = TransportLog()
        try group.loops[0].submitAndWait {
            ends.value.client.delegate = clientLog
            ends.value.owner.write(Array("bye".utf8))
            ends.value.owner.closeAfterFlush()
        }
        XCTAssertTrue(clientLog.waitForEvent("closed"), "\(clientLog.events.value)")
        XCTAssertEqual(String(decoding: clientLog.bytes.value, as: UTF8.self), "bye")
        eventually("the pipe finished", within: 5) { finished.value >= 1 }
        usleep(200_000)   // must be a sleep: room for a second finish, which must not come
        XCTAssertEqual(finished.value, 1, "finished once both ends closed, and once only")
    }

    func testAClientThatNeverReadsStopsThePipeReadingTheOwner() throws {
        let finished = Locked(0)
        let ends = try piped(finished: finished)
        let loop = group.loops[0]
        let ownerLog = TransportLog()
        try loop.submitAndWait {
            ends.value.client.pauseReading()
            ends.value.owner.delegate = ownerLog
            // Far more than two high-water marks: the owner must see back-pressure.
            for _ in 0..<64 { ends.value.owner.write([UInt8](repeating: 1, count: 64 * 1024)) }
        }
        // Until the owner's queue stops shrinking (the same over three polls): had the pipe kept
        // reading, it would drain to nothing instead.
        var (held, ownerWritable, previous) = (0, true, [-1, -2])
        try eventually("the owner's output settles (\(held) bytes queued)", within: 5, poll: 0.05) {
            (held, ownerWritable) = try loop.submitAndWait { (ends.value.owner.queuedBytes, ends.value.owner.isWritable) }
            defer { previous = [previous[1], held] }
            return previous.allSatisfy { $0 == held }
        }
        XCTAssertFalse(ownerWritable, "the owner's output backs up instead of the pipe holding it")
        XCTAssertGreaterThan(held, 64 * 64 * 1024 - 2 * 256 * 1024 - 64 * 1024, "the pipe holds at most a high-water mark and a read")
    }
}
