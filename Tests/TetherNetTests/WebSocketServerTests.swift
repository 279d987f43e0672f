import Foundation
import TetherNet
import TetherTestSupport
import XCTest

final class WebSocketServerTests: XCTestCase {
    private var group: EventLoopGroup!
    private var server: HTTPServer!
    private var port: UInt16 = 0
    private let application = EchoApplication()

    override func setUpWithError() throws {
        group = try EventLoopGroup(count: 2)
        application.wsOptions.maxFramePayload = 256 * 1024
        application.wsOptions.maxMessageSize = 512 * 1024
        server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: application)
        port = try server.start()
    }

    override func tearDown() {
        server.stopAccepting()
        group.shutdown()
    }

    private func pythonClient(_ scenario: String) throws -> [String: Any] {
        let result = try PythonPeer.run(script: "ws_client.py", arguments: ["ws://127.0.0.1:\(port)/", scenario])
        XCTAssertEqual(result.status, 0, String(result.stderr.suffix(600)))
        return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    func testPythonWebsocketsClientEchoesTextBinaryLargeMessagesAndPings() throws {
        let result = try pythonClient("echo")
        XCTAssertEqual(result["text"] as? String, "hello")
        XCTAssertEqual(result["binary"] as? [Int], [0, 1, 255])
        XCTAssertEqual(result["big_ok"] as? Bool, true)
        XCTAssertEqual(result["pong"] as? Bool, true)
        XCTAssertEqual(result["close_code"] as? Int, 1000, "the close handshake echoes the client's code")
    }

    func testPythonWebsocketsClientSeesMessagesInOrder() throws {
        XCTAssertEqual(try pythonClient("many")["ordered"] as? Bool, true)
    }

    // MARK: Handshake rules

    func testVersionOtherThan13Or8Gets400WithTheSupportedVersions() throws {
        let client = try RawClient(port: port)
        client.send("GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 12\r\n\r\n")
        let response = client.readText()
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 400 "), response)
        XCTAssertTrue(response.contains("Sec-WebSocket-Version: 13, 8\r\n"))
    }

    func testTheApplicationCanRefuseBeforeThe101() throws {
        let client = try RawClient(port: port)
        let (status, _) = client.upgrade(extraHeaders: "Origin: https://evil.example\r\n")
        XCTAssertTrue(status.hasPrefix("HTTP/1.1 403 Forbidden"), status)
    }

    func testUpgradeAnswers101WithTheAcceptValue() throws {
        let client = try RawClient(port: port)
        let (status, _) = client.upgrade()
        XCTAssertTrue(status.hasPrefix("HTTP/1.1 101 Switching Protocols"))
        XCTAssertTrue(status.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        XCTAssertTrue(status.contains("\r\nUpgrade: websocket\r\n"))
        XCTAssertTrue(status.contains("\r\nConnection: Upgrade"))
        XCTAssertFalse(status.contains("Sec-WebSocket-Extensions"))
    }

    // MARK: Frame rules, each answered with its close code

    /// Sends `frames` after the upgrade and returns the close code the server sent.
    private func closeCode(after frames: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> UInt16? {
        let client = try RawClient(port: port)
        var (_, rest) = client.upgrade()
        client.send(frames)
        rest += client.readAll()
        var parser = WebSocketFrameParser(role: .client, maxFramePayload: 1 << 20)
        parser.feed(rest)
        while let frame = try parser.nextFrame() {
            if frame.opcode == .close {
                // Transport failures close with the bare code, as the reference does (relay.md §2.7).
                XCTAssertEqual(frame.payload.count, 2, "close frame carries a reason", file: file, line: line)
                return frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : nil
            }
        }
        return nil
    }

    private func masked(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrameEncoder.encode(WebSocketFrame(fin: fin, opcode: opcode, payload: payload), maskingKey: (9, 8, 7, 6))
    }

    func testUnmaskedClientFrameCloses1002() throws {
        XCTAssertEqual(try closeCode(after: WebSocketFrameEncoder.encode(WebSocketFrame(opcode: .text, payload: [0x41]))), 1002)
    }

    func testReservedBitsAndOpcodesClose1002() throws {
        var rsv = masked(.text, [0x41])
        rsv[0] |= 0x40
        XCTAssertEqual(try closeCode(after: rsv), 1002)
        var opcode = masked(.text, [0x41])
        opcode[0] = 0x83
        XCTAssertEqual(try closeCode(after: opcode), 1002)
    }

    func testFragmentedOrOversizedControlFramesClose1002() throws {
        XCTAssertEqual(try closeCode(after: masked(.ping, [1], fin: false)), 1002)
        var long = WebSocketFrameEncoder.header(opcode: .ping, length: 126, maskingKey: (1, 2, 3, 4))
        long += [UInt8](repeating: 0, count: 126)
        XCTAssertEqual(try closeCode(after: long), 1002)
    }

    func testContinuationWithoutAMessageCloses1002() throws {
        XCTAssertEqual(try closeCode(after: masked(.continuation, [1])), 1002)
    }

    func testFrameAboveTheCapCloses1009() throws {
        XCTAssertEqual(try closeCode(after: WebSocketFrameEncoder.header(opcode: .binary, length: 300 * 1024, maskingKey: (1, 2, 3, 4))), 1009)
    }

    func testMessageAboveTheCapAcrossFragmentsCloses1009() throws {
        let chunk = [UInt8](repeating: 7, count: 200 * 1024)
        XCTAssertEqual(try closeCode(after: masked(.binary, chunk, fin: false) + masked(.continuation, chunk, fin: false)
                                        + masked(.continuation, chunk)), 1009)
    }

    func testInvalidUTF8ClosesWith1007EvenAcrossFragments() throws {
        XCTAssertEqual(try closeCode(after: masked(.text, [0xED, 0xA0, 0x80])), 1007)
        XCTAssertEqual(try closeCode(after: masked(.text, [0xCE], fin: false) + masked(.continuation, [0x41])), 1007)
    }

    func testInvalidCloseCodeCloses1002() throws {
        XCTAssertEqual(try closeCode(after: masked(.close, [0x03, 0xEC])), 1002, "1004")
        XCTAssertEqual(try closeCode(after: masked(.close, [0x03])), 1002, "one-byte payload")
    }

    func testCloseHandshakeEchoesTheCode() throws {
        XCTAssertEqual(try closeCode(after: masked(.close, WebSocketFrameEncoder.closePayload(code: 4000, reason: "done"))), 4000)
    }

    func testPingIsAnsweredWithPongCarryingTheSamePayload() throws {
        let client = try RawClient(port: port)
        var (_, rest) = client.upgrade()
        client.send(masked(.ping, Array("abc".utf8)))
        rest += client.read(atLeast: 5 - rest.count)
        var parser = WebSocketFrameParser(role: .client, maxFramePayload: 1024)
        parser.feed(rest)
        XCTAssertEqual(try parser.nextFrame(), WebSocketFrame(opcode: .pong, payload: Array("abc".utf8)))
    }

    func testServerKeepsServingAfterAProtocolError() throws {
        XCTAssertEqual(try closeCode(after: masked(.text, [0xFF])), 1007)
        XCTAssertEqual(try pythonClient("echo")["text"] as? String, "hello")
    }
}

final class BackPressureTests: XCTestCase {
    func testAPeerThatStopsReadingDoesNotMakeTheServerBufferWithoutBound() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: EchoApplication())
        let port = try server.start()
        defer { server.stopAccepting() }
        let client = try RawClient(port: port)
        _ = client.upgrade()
        // Send 64 MiB of echo requests on a non-blocking socket and never read a byte back.
        var flags = fcntl(client.fd, F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(client.fd, F_SETFL, flags)
        let frame = WebSocketFrameEncoder.encode(WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 1, count: 64 * 1024)),
                                                 maskingKey: (1, 2, 3, 4))
        // Send until the sender has made no progress for a full second: every buffer on the way
        // (both kernels and the server's queue) is then full.
        let deadline = Date().addingTimeInterval(20)
        let sent = try client.flood(frame, limit: 64 << 20, quiet: 1, until: deadline)
        // The server paused reading once its queue passed the high-water mark: the sender stalls
        // long before 64 MiB, and the server's queue stays near the mark (one frame over, at most).
        XCTAssertLessThan(sent, 64 << 20, "the sender was stopped by back-pressure")
        XCTAssertLessThan(Date(), deadline, "stalled, not timed out")
        // A slow (debug, loaded) server may still be catching up on what the kernels hold; give it
        // time to fill its own queue and pause.
        eventually("the server queued and paused", within: 10) { EchoSocket.shared.maxQueuedBytes > 0 }
        XCTAssertLessThan(EchoSocket.shared.maxQueuedBytes, 256 * 1024 + 2 * 64 * 1024 + 64)
    }
}

final class KeepaliveTests: XCTestCase {
    func testServerPingsAndDropsAPeerThatStopsAnswering() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let application = EchoApplication()
        application.wsOptions.keepaliveInterval = .milliseconds(200)
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: application)
        let port = try server.start()
        defer { server.stopAccepting() }

        // A raw client that never answers: it sees a ping, then the connection is dropped
        // (no close frame: the peer is presumed dead) between one and two intervals later.
        let silent = try RawClient(port: port)
        _ = silent.upgrade()
        let started = Date()
        let received = silent.readAll()
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(Array(received.prefix(2)), [0x89, 0x00], "an empty ping first")
        XCTAssertGreaterThanOrEqual(elapsed, 0.35)
        XCTAssertLessThan(elapsed, 2.0)

        // The Python client answers pings automatically and stays connected across many intervals.
        let result = try PythonPeer.run(script: "ws_client.py", arguments: ["ws://127.0.0.1:\(port)/", "slow"])
        XCTAssertEqual(result.status, 0, String(result.stderr.suffix(600)))
        XCTAssertTrue(result.stdout.contains("\"survived\": true"), result.stdout)
    }
}
