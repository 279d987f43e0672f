import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

final class InMemoryTransportTests: XCTestCase {
    private var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 2) }
    override func tearDown() { group.shutdown() }

    func testAWebSocketServerAndClientExchangeMessagesWithoutSockets() throws {
        let (serverLoop, clientLoop) = (group.loops[0], group.loops[1])
        let ends = UncheckedBox(InMemoryTransport.pair(serverLoop, clientLoop))
        let serverEvents = Inbox()
        let clientInbox = Inbox()
        try serverLoop.submitAndWait {
            _ = WebSocketConnection(connection: ends.value.0, role: .server, delegate: EchoThenRecord(serverEvents))
        }
        let client = UncheckedBox(try clientLoop.submitAndWait {
            UncheckedBox(WebSocketConnection(connection: ends.value.1, role: .client, delegate: clientInbox))
        }.value)

        clientLoop.execute { client.value.send(text: Array("hello".utf8)) }
        XCTAssertEqual(clientInbox.next(), "text:hello")
        XCTAssertEqual(serverEvents.next(), "text:hello")
        clientLoop.execute { client.value.send(binary: [UInt8](repeating: 3, count: 100_000)) }
        XCTAssertEqual(clientInbox.next(), "binary:100000")
        XCTAssertEqual(serverEvents.next(), "binary:100000")

        // The close handshake runs over the pair, and both transports end.
        clientLoop.execute { client.value.close(code: 4000, reason: "bye") }
        XCTAssertEqual(serverEvents.next(), "close:4000:bye")
        XCTAssertEqual(clientInbox.next(), "close:4000:", "the server echoes the code alone")
        XCTAssertTrue(try serverLoop.submitAndWait { ends.value.0.isClosed })
        XCTAssertTrue(try clientLoop.submitAndWait { ends.value.1.isClosed })
    }

    func testWritabilityFlipsAtTheWaterMarksWhileAPausedReaderHoldsTheData() throws {
        let loop = group.loops[0]
        let ends = UncheckedBox(InMemoryTransport.pair(loop))
        let writerLog = TransportLog(), readerLog = TransportLog()
        try loop.submitAndWait {
            let (writer, reader) = ends.value
            writer.delegate = writerLog
            reader.delegate = readerLog
            writer.highWaterMark = 1000
            writer.lowWaterMark = 500
            reader.pauseReading()
            writer.write([UInt8](repeating: 1, count: 600))
            XCTAssertTrue(writer.isWritable, "600 is under the high-water mark")
            writer.write([UInt8](repeating: 2, count: 600))
            XCTAssertFalse(writer.isWritable, "1200 is over it")
        }
        XCTAssertEqual(writerLog.events.value, ["unwritable"])
        // Several iterations later the paused reader has read nothing, and the bytes still count.
        usleep(100_000)   // must be a sleep: "reads nothing while paused" is the check
        XCTAssertEqual(readerLog.bytes.value.count, 0)
        XCTAssertEqual(try loop.submitAndWait { ends.value.0.queuedBytes }, 1200)

        try loop.submitAndWait { ends.value.1.resumeReading() }
        XCTAssertTrue(readerLog.waitForBytes(1200))
        XCTAssertEqual(readerLog.bytes.value, [UInt8](repeating: 1, count: 600) + [UInt8](repeating: 2, count: 600))
        XCTAssertTrue(writerLog.waitForEvent("writable"), "\(writerLog.events.value)")
        XCTAssertTrue(try loop.submitAndWait { ends.value.0.isWritable && ends.value.0.queuedBytes == 0 })
    }

    func testClosingEitherEndReachesTheOtherAfterWhatWasSent() throws {
        let loop = group.loops[0]
        let ends = UncheckedBox(InMemoryTransport.pair(loop))
        let firstLog = TransportLog(), secondLog = TransportLog()
        try loop.submitAndWait {
            let (first, second) = ends.value
            first.delegate = firstLog
            second.delegate = secondLog
            first.write(Array("last words".utf8))
            first.closeAfterFlush()
        }
        XCTAssertTrue(secondLog.waitForEvent("closed"), "\(secondLog.events.value)")
        XCTAssertEqual(String(decoding: secondLog.bytes.value, as: UTF8.self), "last words", "data first, then end-of-stream")
        XCTAssertEqual(firstLog.events.value, ["closed"])

        // The other direction, closed at once.
        let more = UncheckedBox(InMemoryTransport.pair(loop))
        let fourthLog = TransportLog()
        try loop.submitAndWait {
            let (third, fourth) = more.value
            fourth.delegate = fourthLog
            third.close()
            // A write to a closed end goes nowhere.
            third.write([1, 2, 3])
        }
        XCTAssertTrue(fourthLog.waitForEvent("closed"))
        XCTAssertEqual(fourthLog.bytes.value.count, 0)
        XCTAssertTrue(try loop.submitAndWait { more.value.1.isClosed })
    }

    func testAnEndHandedOffToAnotherLoopKeepsExchangingBothWays() throws {
        let (home, away) = (group.loops[0], group.loops[1])
        let ends = UncheckedBox(InMemoryTransport.pair(home))
        let fixedLog = TransportLog(), movingLog = TransportLog()
        try home.submitAndWait {
            let (fixed, moving) = ends.value
            fixed.delegate = fixedLog
            moving.delegate = movingLog
            fixed.write(Array("before ".utf8))
        }
        XCTAssertTrue(movingLog.waitForBytes(7))
        // Bytes sent while the end is in transit wait for it on the target loop.
        try home.submitAndWait {
            let (fixed, moving) = ends.value
            moving.handoff(to: away) { $0.write(Array("from away".utf8)) }
            fixed.write(Array("during ".utf8))
        }
        XCTAssertTrue(movingLog.waitForBytes(7 + 7), "what waited in the inbox is read on arrival")
        home.execute { ends.value.0.write(Array("after".utf8)) }
        XCTAssertTrue(movingLog.waitForBytes(7 + 7 + 5))
        XCTAssertEqual(String(decoding: movingLog.bytes.value, as: UTF8.self), "before during after")
        XCTAssertEqual(movingLog.loops.value.first, 0)
        XCTAssertEqual(Set(movingLog.loops.value.dropFirst()), [1], "read on the target loop after the move")
        XCTAssertTrue(fixedLog.waitForBytes(9))
        XCTAssertEqual(String(decoding: fixedLog.bytes.value, as: UTF8.self), "from away")
        XCTAssertTrue(try away.submitAndWait { ends.value.1.loop === away })
    }
}

/// Echoes every message (as `EchoSocket` does) and records what it saw in an inbox.
private final class EchoThenRecord: WebSocketDelegate, @unchecked Sendable {
    let inbox: Inbox
    init(_ inbox: Inbox) { self.inbox = inbox }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        socket.send(text: text)
        inbox.webSocket(socket, didReceiveText: text)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        socket.send(binary: data)
        inbox.webSocket(socket, didReceiveBinary: data)
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        inbox.webSocketDidClose(socket, code: code, reason: reason)
    }
}

/// What a transport's delegate was told: bytes, the loop of each read, and events.
final class TransportLog: TransportDelegate, @unchecked Sendable {
    let bytes = Locked<[UInt8]>([])
    let loops = Locked<[Int]>([])
    let events = Locked<[String]>([])

    func transport(_ transport: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        self.bytes.mutate { $0 += bytes }
        loops.mutate { $0.append(transport.loop.index) }
    }

    func transportDidClose(_ transport: any Transport, error: NetError?) {
        events.mutate { $0.append(error == nil ? "closed" : "closed: \(error!)") }
    }

    func transportWritabilityChanged(_ transport: any Transport) {
        events.mutate { $0.append(transport.isWritable ? "writable" : "unwritable") }
    }

    func waitForBytes(_ count: Int) -> Bool { wait { self.bytes.value.count >= count } }
    func waitForEvent(_ event: String) -> Bool { wait { self.events.value.contains(event) } }

    private func wait(_ condition: () -> Bool) -> Bool {
        Eventually.holds(within: 5, every: 0.002, condition)
    }
}
