import Foundation
import Glibc
import TetherNet
import TetherSync
import TetherTestSupport
import XCTest

final class TimerQueueTests: XCTestCase {
    func testPopsDueTimersInDeadlineThenScheduleOrder() {
        var queue = TimerQueue<String>()
        queue.schedule(at: .milliseconds(30), "c")
        queue.schedule(at: .milliseconds(10), "a")
        queue.schedule(at: .milliseconds(10), "b")
        let late = queue.schedule(at: .milliseconds(20), "cancelled")
        queue.cancel(late)
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.nextDeadline(), .milliseconds(10))
        XCTAssertEqual(queue.popExpired(now: .milliseconds(9)), [])
        XCTAssertEqual(queue.popExpired(now: .milliseconds(25)), ["a", "b"])
        XCTAssertEqual(queue.nextDeadline(), .milliseconds(30), "the cancelled entry is skipped")
        XCTAssertEqual(queue.popExpired(now: .milliseconds(100)), ["c"])
        XCTAssertNil(queue.nextDeadline())
        XCTAssertEqual(queue.count, 0)
    }

    func testManyRandomTimersComeOutSorted() {
        var queue = TimerQueue<UInt64>()
        var deadlines: [UInt64] = (0..<1000).map { _ in UInt64.random(in: 0..<10_000) }
        for d in deadlines { queue.schedule(at: .milliseconds(d), d) }
        deadlines.sort()
        XCTAssertEqual(queue.popExpired(now: MonotonicInstant(nanoseconds: .max)), deadlines)
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
        let batch = try SlowBatch(names: ["a", "b"])
        defer { batch.group.shutdown() }
        batch.sendAllInOneBatch()
        let seen = batch.slow.seen.value
        XCTAssertEqual(seen.count, 1, "the second handler looks at the first client once")
        XCTAssertEqual(seen.first?.sawAck, true, "the first handler's ack was on the wire before the second event was handled: \(seen)")
    }

    /// A pass between two events runs queued tasks for about `flushBudget`, not a whole
    /// allowance: a backlog of slow tasks (a reconnect storm's storage answers) neither runs
    /// whole between every two slow events nor waits for the end of a long iteration.
    func testPassesBetweenEventsRunQueuedTasksForAboutTheBudget() throws {
        let batch = try SlowBatch(names: ["a", "b", "c"])
        defer { batch.group.shutdown() }
        let ran = Locked(0), slow = batch.slow
        try batch.loop.submitAndWait { slow.ran = ran }
        batch.sendAllInOneBatch {
            // Must be a sleep: each task is 100 µs of work, the unit the budget is measured in.
            for _ in 0..<1_000 { batch.loop.execute { ran.mutate { $0 += 1 }; usleep(100) } }
        }
        let before = batch.slow.tasksBefore.value
        XCTAssertEqual(before.count, 3)
        guard before.count == 3 else { return }
        // 1 ms of tasks of at least 100 µs each: 1 to 11 per pass (usleep may sleep longer).
        for (pass, ran) in [before[1] - before[0], before[2] - before[1]].enumerated() {
            XCTAssertTrue((1...11).contains(ran), "pass \(pass + 1) ran \(ran) tasks: \(before)")
        }
    }
}

/// Clients whose messages reach the server in one epoll batch, each handled by `Slow`: it
/// writes an ack, then spends 3 ms (past `EventLoop.flushBudget`).
private final class SlowBatch: @unchecked Sendable {
    let group: EventLoopGroup
    let loop: EventLoop
    let slow: Slow
    let clients: [String: RawClient]
    private let listener: UncheckedBox<TCPListener>

    final class Slow: TransportDelegate, @unchecked Sendable {
        /// Client descriptors by the name each client sends, and names handled so far.
        var clients: [String: Int32] = [:]
        var handled: [String] = []
        /// What each handler saw of each earlier client: was its ack already on the wire?
        let seen = Locked<[(name: String, earlier: String, sawAck: Bool)]>([])
        /// Tasks counted by `ran` when each handler began.
        let tasksBefore = Locked<[Int]>([])
        var ran: Locked<Int>?
        let allHandled = DispatchSemaphore(value: 0)
        var expected = 0

        func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
            let name = String(decoding: bytes, as: UTF8.self)
            tasksBefore.mutate { $0.append(ran?.value ?? 0) }
            for earlier in handled {
                // The ack left in a writev if it was flushed; give loopback delivery a moment.
                var poller = pollfd(fd: clients[earlier] ?? -1, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, 100) == 1
                seen.mutate { $0.append((name, earlier, ready)) }
            }
            connection.write(Array("ack".utf8))
            usleep(3_000)   // must be a sleep: the 3 ms of work past the flush budget is the scenario
            handled.append(name)
            if handled.count == expected { allHandled.signal() }
        }
        func transportDidClose(_ connection: any Transport, error: NetError?) {}
        func transportWritabilityChanged(_ connection: any Transport) {}
    }

    init(names: [String]) throws {
        group = try EventLoopGroup(count: 1)
        loop = group.loops[0]
        let slow = Slow(), loop = self.loop
        slow.expected = names.count
        self.slow = slow
        let accepted = Locked(0)
        listener = try loop.submitAndWait {
            UncheckedBox(try TCPListener(loop: loop, address: try SocketAddress(host: "127.0.0.1", port: 0)) { fd, peer in
                let connection = try! TCPConnection(fd: fd, loop: loop, peer: peer)
                connection.delegate = slow
                accepted.mutate { $0 += 1 }
            })
        }
        var clients: [String: RawClient] = [:]
        for name in names { clients[name] = try RawClient(port: listener.value.address.port) }
        self.clients = clients
        let descriptors = clients.mapValues(\.fd)
        try loop.submitAndWait { slow.clients = descriptors }
        eventually("\(names.count) clients accepted", within: 5, poll: 0.001) { accepted.value >= names.count }
    }

    /// Holds the loop inside a task while `meanwhile` runs and every client sends its name, so
    /// the next epoll_wait returns them all; waits until every handler ran, then reads the acks.
    func sendAllInOneBatch(_ meanwhile: () -> Void = {}) {
        let inside = DispatchSemaphore(value: 0)
        // Must be a sleep: it holds the loop inside a task while the clients send, so one epoll
        // batch returns them all; the loop can wait on nothing else meanwhile.
        loop.execute { inside.signal(); usleep(50_000) }
        inside.wait()
        meanwhile()
        for name in clients.keys.sorted() { clients[name]!.send(name) }
        // Nobody reads an ack before every handler ran: the handlers must find them unread.
        XCTAssertEqual(slow.allHandled.wait(timeout: .now() + 10), .success)
        for name in clients.keys.sorted() { XCTAssertEqual(clients[name]!.read(atLeast: 3), Array("ack".utf8)) }
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
            ids.append(queue.schedule(at: .milliseconds(5), token))
        }
        queue.cancel(ids[0])
        XCTAssertNil(probe, "a cancelled timer no longer holds its payload")
        // Many cancellations trigger a rebuild; the survivors still come out in order.
        var keep: [UInt64] = []
        for i in 0..<1000 {
            let id = queue.schedule(at: .milliseconds(UInt64(1000 - i)), Token())
            if i % 10 == 0 { keep.append(UInt64(1000 - i)) } else { queue.cancel(id) }
        }
        XCTAssertEqual(queue.count, keep.count)
        var popped: [UInt64] = []
        var now: UInt64 = 0
        while queue.count > 0 {
            now += 1
            popped += queue.popExpired(now: .milliseconds(now)).map { _ in now }
        }
        XCTAssertEqual(popped, keep.sorted())
    }
}
