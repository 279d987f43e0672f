import Foundation
import Glibc
import TetherNet
import XCTest

final class TimerQueueTests: XCTestCase {
    func testPopsDueTimersInDeadlineThenScheduleOrder() {
        var queue = TimerQueue<String>()
        queue.schedule(at: 30, "c")
        queue.schedule(at: 10, "a")
        queue.schedule(at: 10, "b")
        let late = queue.schedule(at: 20, "cancelled")
        queue.cancel(late)
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.nextDeadline(), 10)
        XCTAssertEqual(queue.popExpired(now: 9), [])
        XCTAssertEqual(queue.popExpired(now: 25), ["a", "b"])
        XCTAssertEqual(queue.nextDeadline(), 30, "the cancelled entry is skipped")
        XCTAssertEqual(queue.popExpired(now: 100), ["c"])
        XCTAssertNil(queue.nextDeadline())
        XCTAssertEqual(queue.count, 0)
    }

    func testManyRandomTimersComeOutSorted() {
        var queue = TimerQueue<UInt64>()
        var deadlines: [UInt64] = (0..<1000).map { _ in UInt64.random(in: 0..<10_000) }
        for d in deadlines { queue.schedule(at: d, d) }
        deadlines.sort()
        XCTAssertEqual(queue.popExpired(now: .max), deadlines)
    }
}

final class EventLoopTests: XCTestCase {
    func testTasksRunOnTheLoopThreadInSubmissionOrder() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let order = Locked<[Int]>([])
        for i in 0..<100 { loop.execute { order.mutate { $0.append(i) } } }
        let onLoop = try loop.submitAndWait { loop.inEventLoop }
        XCTAssertTrue(onLoop)
        XCTAssertFalse(loop.inEventLoop)
        XCTAssertEqual(order.value, Array(0..<100))
    }

    func testTimersFireOnTheRealClockAndCanBeCancelled() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let fired = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            let cancelled = loop.schedule(after: .milliseconds(10)) { fired.mutate { $0.append("cancelled") } }
            loop.cancel(cancelled)
            loop.schedule(after: .milliseconds(30)) { fired.mutate { $0.append("late") }; done.signal() }
            loop.schedule(after: .milliseconds(5)) { fired.mutate { $0.append("early") } }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertEqual(fired.value, ["early", "late"])
    }

    func testManualClockDrivesTimersWithoutWaiting() throws {
        let clock = ManualClock()
        let loop = try EventLoop(clock: clock)
        var fired: [Int] = []
        loop.schedule(after: .seconds(30)) { fired.append(30) }
        loop.schedule(after: .seconds(10)) { fired.append(10) }
        loop.runTimers()
        XCTAssertEqual(fired, [])
        clock.advance(by: .seconds(10))
        loop.runTimers()
        XCTAssertEqual(fired, [10])
        clock.advance(by: .seconds(20))
        loop.runTimers()
        XCTAssertEqual(fired, [10, 30])
    }

    func testHandoffMovesALiveConnectionToAnotherLoop() throws {
        let group = try EventLoopGroup(count: 2)
        defer { group.shutdown() }
        let (first, second) = (group.loops[0], group.loops[1])
        let seen = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        final class Recorder: TransportDelegate, @unchecked Sendable {
            let seen: Locked<[String]>
            let done: DispatchSemaphore
            let target: EventLoop
            init(_ seen: Locked<[String]>, _ done: DispatchSemaphore, _ target: EventLoop) { self.seen = seen; self.done = done; self.target = target }
            func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
                let text = String(decoding: bytes, as: UTF8.self)
                seen.mutate { $0.append("loop\(connection.loop.index):\(text)") }
                connection.write(Array("ack \(text)".utf8))
                if text.contains("two") { done.signal() }
                // The first message decides the connection's home loop, as a room name will.
                if connection.loop !== target, let tcp = connection as? TCPConnection { tcp.handoff(to: target) { _ in } }
            }
            func transportDidClose(_ connection: any Transport, error: NetError?) {}
        }
        let recorder = Recorder(seen, done, second)
        let listener = try first.submitAndWait {
            UncheckedBox(try TCPListener(loop: first, address: try SocketAddress(host: "127.0.0.1", port: 0)) { fd, peer in
                let connection = try! TCPConnection(fd: fd, loop: first, peer: peer)
                connection.delegate = recorder
            })
        }
        _ = listener
        let client = try RawClient(port: listener.value.address.port)
        client.send("one")
        XCTAssertEqual(String(decoding: client.read(atLeast: 7), as: UTF8.self), "ack one")
        // The first read handed the connection off; everything after is served by the second loop.
        client.send("two")
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertEqual(String(decoding: client.read(atLeast: 7), as: UTF8.self), "ack two")
        XCTAssertEqual(seen.value, ["loop0:one", "loop1:two"])
    }

    /// A handler that spends milliseconds per event (the signaling server verifies a signature
    /// per message) must not hold what it wrote until the whole iteration is done: past
    /// `EventLoop.flushBudget` the loop flushes before the next event of the same iteration.
    func testAnExpensiveHandlersWriteIsFlushedBeforeTheNextEventOfTheSameIteration() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        final class Slow: TransportDelegate, @unchecked Sendable {
            /// Client descriptors by the name each client sends; names handled so far; and what
            /// each later handler saw: (name, earlier name, had that client its ack already).
            var clients: [String: Int32] = [:]
            var handled: [String] = []
            let seen = Locked<[(String, String, Bool)]>([])
            let bothHandled = DispatchSemaphore(value: 0)
            func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
                let name = String(decoding: bytes, as: UTF8.self)
                for earlier in handled {
                    var byte: UInt8 = 0
                    let peeked = recv(clients[earlier] ?? -1, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
                    seen.mutate { $0.append((name, earlier, peeked == 1)) }
                }
                connection.write(Array("ack".utf8))
                usleep(3_000)
                handled.append(name)
                if handled.count == 2 { bothHandled.signal() }
            }
            func transportDidClose(_ connection: any Transport, error: NetError?) {}
            func transportWritabilityChanged(_ connection: any Transport) {}
        }
        let slow = Slow()
        let accepted = Locked(0)
        let listener = try loop.submitAndWait {
            UncheckedBox(try TCPListener(loop: loop, address: try SocketAddress(host: "127.0.0.1", port: 0)) { fd, peer in
                let connection = try! TCPConnection(fd: fd, loop: loop, peer: peer)
                connection.delegate = slow
                accepted.mutate { $0 += 1 }
            })
        }
        let a = try RawClient(port: listener.value.address.port), b = try RawClient(port: listener.value.address.port)
        let descriptors = ["a": a.fd, "b": b.fd]
        try loop.submitAndWait { slow.clients = descriptors }
        let deadline = Date().addingTimeInterval(5)
        while accepted.value < 2, Date() < deadline { usleep(1_000) }
        XCTAssertEqual(accepted.value, 2)
        // Hold the loop inside a task while both clients send: its next epoll_wait returns both.
        let inside = DispatchSemaphore(value: 0)
        loop.execute { inside.signal(); usleep(50_000) }
        inside.wait()
        a.send("a")
        b.send("b")
        // Nobody reads the acks before both handlers ran: the peek must find them unread.
        XCTAssertEqual(slow.bothHandled.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(a.read(atLeast: 3), Array("ack".utf8))
        XCTAssertEqual(b.read(atLeast: 3), Array("ack".utf8))
        let seen = slow.seen.value
        XCTAssertEqual(seen.count, 1, "the second handler looks at the first client once")
        XCTAssertEqual(seen.first?.2, true, "the first handler's ack was on the wire before the second event was handled: \(seen)")
    }
}

final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: Value
    init(_ value: Value) { storage = value }
    var value: Value { lock.withLock { storage } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&storage) } }
}

struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

final class TimerQueueCancellationTests: XCTestCase {
    func testCancellingReleasesThePayloadAndKeepsOrderAfterARebuild() {
        final class Token: @unchecked Sendable {}
        var queue = TimerQueue<Token>()
        weak var probe: Token?
        var ids: [TimerQueue<Token>.ID] = []
        do {
            let token = Token()
            probe = token
            ids.append(queue.schedule(at: 5, token))
        }
        queue.cancel(ids[0])
        XCTAssertNil(probe, "a cancelled timer no longer holds its payload")
        // Many cancellations trigger a rebuild; the survivors still come out in order.
        var keep: [UInt64] = []
        for i in 0..<1000 {
            let id = queue.schedule(at: UInt64(1000 - i), Token())
            if i % 10 == 0 { keep.append(UInt64(1000 - i)) } else { queue.cancel(id) }
        }
        XCTAssertEqual(queue.count, keep.count)
        var popped: [UInt64] = []
        var now: UInt64 = 0
        while queue.count > 0 {
            now += 1
            popped += queue.popExpired(now: now).map { _ in now }
        }
        XCTAssertEqual(popped, keep.sorted())
    }
}
