import Foundation
import Glibc
import TetherNet
import TetherSync
import TetherTestSupport
import XCTest

/// Issue 29: every connection's own output is bounded, whatever fills it — replies a client
/// never reads included. Past the transport's high-water mark the connection is not read until it
/// drains, and one that stays above it for the stall timeout is closed; pongs coalesce.
final class OutputBoundTests: XCTestCase {
    private var group: EventLoopGroup!
    private var application: EchoApplication!
    private var server: HTTPServer!
    private var port: UInt16 = 0

    private func start(stallTimeout: Duration?, closeTimeout: Duration = .seconds(5), httpStall: Duration = .seconds(30)) throws {
        group = try EventLoopGroup(count: 1)
        application = EchoApplication()
        application.wsOptions.stallTimeout = stallTimeout
        application.wsOptions.closeTimeout = closeTimeout
        var configuration = HTTPServer.Configuration()
        configuration.stallTimeout = httpStall
        server = HTTPServer(group: group, configuration: configuration, delegate: application)
        port = try server.start()
    }

    override func tearDown() {
        server?.stopAccepting()
        group?.shutdown()
    }

    /// The server side of the one upgraded socket: its queued output, read on its loop.
    private func serverQueuedBytes() throws -> Int? {
        guard let socket = application.upgraded.first else { return nil }
        let transfer = UncheckedTransfer(socket)
        return try group.loops[0].submitAndWait { transfer.value.isOpen ? transfer.value.connection.queuedBytes : nil }
    }

    /// A client that writes without ever reading, non-blocking; `smallWindow` gives it a 4 KiB
    /// receive buffer (the attacker), which also makes reading it all later slow.
    private func nonReadingClient(upgrade: Bool = true, smallWindow: Bool = false) throws -> RawClient {
        let client = try RawClient(port: port)
        var size: Int32 = 4096
        if smallWindow { setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if upgrade { XCTAssertTrue(client.upgrade().status.hasPrefix("HTTP/1.1 101")) }
        _ = fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) | O_NONBLOCK)
        return client
    }

    /// Frames as the server sent them (unmasked), and whether the stream ended on a frame boundary.
    private func frames(_ bytes: [UInt8]) -> (frames: [WebSocketFrame], whole: Bool) {
        var parser = WebSocketFrameParser(role: .client, maxFramePayload: 1 << 24)
        parser.feed(bytes)
        var out: [WebSocketFrame] = []
        while let frame = try? parser.nextFrame() { out.append(frame) }
        return (out, parser.bufferedByteCount == 0)
    }

    private func masked(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> [UInt8] {
        WebSocketFrameEncoder.encode(WebSocketFrame(opcode: opcode, payload: payload), maskingKey: (9, 8, 7, 6))
    }

    /// RFC 6455 §5.5.3: a pong need answer only the most recent ping. 20,000 pings sent without
    /// reading leave at most one pong queued, the server reads them all, and the pong the client
    /// finally reads last answers the last ping.
    func testAFloodOfPingsNeverReadQueuesAtMostOnePongAndTheLastPingIsAnswered() throws {
        try start(stallTimeout: .seconds(30))
        let client = try nonReadingClient(smallWindow: true)
        var pings: [UInt8] = []
        for n in 0..<20_000 {
            var payload = [UInt8](repeating: 0x70, count: 125)
            withUnsafeBytes(of: UInt32(n).bigEndian) { payload.replaceSubrange(0..<4, with: $0) }
            pings += masked(.ping, payload)
        }
        var largest = 0
        let sent = try client.flood(pings, limit: pings.count, until: Date().addingTimeInterval(30)) {
            largest = max(largest, try serverQueuedBytes() ?? 0)
        }
        XCTAssertEqual(sent, pings.count, "the server kept reading: its output never passed the mark")
        _ = try Eventually.holds(within: 2) { try serverQueuedBytes() ?? 0 <= 127 }
        largest = max(largest, try serverQueuedBytes() ?? 0)
        XCTAssertLessThanOrEqual(largest, 2 + 125, "one pong queued at most")
        _ = fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) & ~O_NONBLOCK)
        var received: [UInt8] = []
        var last: WebSocketFrame?
        let expected = Array(pings.suffix(131).dropFirst(6)).enumerated().map { $0.element ^ [9, 8, 7, 6][$0.offset % 4] }
        while last?.payload != expected {
            let more = client.read(atLeast: 1)
            if more.isEmpty { break }
            received += more
            last = frames(received).frames.last
        }
        let parsed = frames(received).frames
        XCTAssertTrue(parsed.allSatisfy { $0.opcode == .pong }, "pongs only")
        XCTAssertLessThan(parsed.count, 20_000, "coalesced")
        XCTAssertEqual(parsed.last?.payload, expected, "the most recent ping is answered")
    }

    /// Echoes a client never reads, by a delegate that never pauses itself: once the replies pass
    /// the output read limit the chassis stops reading it (its queue stays near the limit, the
    /// client's sends stop), and after the stall timeout it is closed 1008 `write stalled` — its
    /// close frame after whole frames only.
    func testRepliesNeverReadStopTheReadingAndAStalledSocketIsClosedAfterWholeFrames() throws {
        // The close frame waits behind what the kernels hold; the client has 30 s to read it all.
        try start(stallTimeout: .milliseconds(700), closeTimeout: .seconds(30))
        application.socketDelegate = .leavingTheBoundToTheChassis
        let client = try nonReadingClient()
        let message = masked(.binary, [UInt8](repeating: 0x33, count: 1000))
        var largest = 0
        let sent = try client.flood(message, limit: 256 << 20, quiet: 0.5, until: Date().addingTimeInterval(30)) {
            largest = max(largest, try serverQueuedBytes() ?? 0)
        }
        XCTAssertLessThan(sent, 64 << 20, "the server stopped reading")
        XCTAssertGreaterThan(largest, 256 * 1024, "past the high-water mark: a splice's bulk frames may be")
        XCTAssertLessThanOrEqual(largest, (1 << 20) + 1006, "the read limit: stopped at the frame that crossed it")
        // Unread past the stall timeout: the server gives up on the socket (sends its close).
        try eventually("the stalled socket closed by the server", within: 5) { try serverQueuedBytes() == nil }
        _ = fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) & ~O_NONBLOCK)
        var received: [UInt8] = []
        while true {
            let more = client.read(atLeast: 1)
            if more.isEmpty { break }
            received += more
            // The close frame: 0x88, length 15 (the code and "write stalled"); echoes hold only 0x33.
            if received.suffix(17).starts(with: [0x88, 0x0F]) { break }
        }
        let (parsed, whole) = frames(received)
        XCTAssertTrue(whole, "no frame cut off")
        XCTAssertEqual(parsed.last?.opcode, .close)
        XCTAssertEqual(parsed.last.map { Array($0.payload) }, WebSocketFrameEncoder.closePayload(code: 1008, reason: "write stalled"))
        XCTAssertTrue(parsed.dropLast().allSatisfy { $0.opcode == .binary && $0.payload.count == 1000 })
    }

    /// Pipelined requests answered later (from another thread, as a store lane answers): while
    /// one awaits its reply nothing more is read, so a client pipelining as fast as it can write
    /// fills the kernel's buffers and stops, instead of the server's parser (before: 3.6 GiB in
    /// 4.5 s against `tether push`).
    func testPipelinedRequestsWaitInTheKernelWhileOneAwaitsItsReply() throws {
        try start(stallTimeout: nil)
        let client = try nonReadingClient(upgrade: false)
        let request = Array("POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: 8192\r\n\r\n".utf8) + [UInt8](repeating: 0x42, count: 8192)
        let sent = try client.flood(request, limit: 256 << 20, quiet: 1, until: Date().addingTimeInterval(30))
        XCTAssertLessThan(sent, 32 << 20, "the server read no further than the request in hand")
    }

    /// Pipelined requests whose responses are never read: the server stops reading requests once
    /// the responses pass the mark, and closes the connection after its stall timeout.
    func testPipelinedRequestsWhoseAnswersAreNeverReadStopTheReadingAndTheConnectionIsClosed() throws {
        try start(stallTimeout: nil, httpStall: .milliseconds(700))
        let client = try nonReadingClient(upgrade: false)
        let body = [UInt8](repeating: 0x41, count: 8192)
        let request = Array("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
        let sent = try client.flood(request, limit: 256 << 20, quiet: 0.5, until: Date().addingTimeInterval(30))
        XCTAssertLessThan(sent, 64 << 20, "the server stopped reading requests")
        // Must be a sleep: the client stays unread past the 700 ms stall timeout, and an HTTP
        // connection shows nothing to wait on while its close waits behind the kernels' buffers.
        Thread.sleep(forTimeInterval: 1.5)
        _ = fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) & ~O_NONBLOCK)
        let started = Date()
        let received = client.readAll(limit: 256 << 20)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4.5, "closed (end of stream), not the read timeout")
        XCTAssertLessThan(received.count, sent, "not every request was answered")
    }
}
