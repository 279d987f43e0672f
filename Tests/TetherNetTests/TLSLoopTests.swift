import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

/// TLS connections that move between loops, and the once-per-iteration output path.
final class TLSLoopTests: XCTestCase {
    private var pki: TestPKI!
    private var group: EventLoopGroup!
    private var context: TLSServerContext!

    override func setUpWithError() throws {
        pki = try TestPKI()
        group = try EventLoopGroup(count: 2)
        context = try TLSServerContext(certificateChainPath: pki.path("server.pem"), privateKeyPath: pki.path("server.key"))
    }

    override func tearDown() { group.shutdown() }

    func testATLSWebSocketHandedOffToAnotherLoopKeepsWorkingBothWays() throws {
        let application = HandoffApplication(group: group)
        var configuration = HTTPServer.Configuration()
        configuration.tls = context
        let server = HTTPServer(group: group, configuration: configuration, delegate: application)
        let port = try server.start()
        defer { server.stopAccepting() }
        let trusted = try TLSClientContext(caFile: pki.path("ca.pem"))

        // Several sockets, so both loops accept some and hand them to the other.
        for round in 0..<4 {
            let inbox = Inbox()
            let socket = UncheckedBox(try waitFor {
                WebSocketClient.connect("wss://localhost:\(port)/", tls: trusted, delegate: inbox, on: group.loops[round % 2], completion: $0)
            }.get())
            let loop = socket.value.connection.loop
            loop.execute { socket.value.send(text: Array("round \(round)".utf8)) }
            XCTAssertEqual(inbox.next(), "text:round \(round)")
            // A message of many records, each way, after the move.
            loop.execute { socket.value.send(binary: [UInt8](repeating: 7, count: 300 * 1024)) }
            XCTAssertEqual(inbox.next(), "binary:\(300 * 1024)")
            loop.execute { socket.value.close() }
            XCTAssertEqual(inbox.next(), "close:1000:")
        }
        let moves = application.moves.value
        XCTAssertEqual(moves.count, 4)
        for move in moves { XCTAssertNotEqual(move.from, move.to, "served on the other loop") }
    }

    func testRecordsAlreadyReadWhenAHandoffStartsAreDecryptedOnTheNewLoop() throws {
        let (first, second) = (group.loops[0], group.loops[1])
        // Three records, which fit in one read of the socket together.
        let payload = (0..<(40 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let server = HandoffOnFirstRead(target: second, expecting: payload.count)
        let listener = try tlsListener(on: first) { tls in
            tls.delegate = server
            // Says "ready" and stops reading a while, so the client's records all wait in the
            // kernel and the next read takes every one of them.
            tls.onHandshake = { _ in
                tls.write(Array("ready".utf8))
                tls.pauseReading()
                first.schedule(after: .milliseconds(300)) { tls.resumeReading() }
            }
        }
        defer { _ = try? first.submitAndWait { listener.value.close() } }

        // The server decrypts the first record, hands the connection off, and nothing more
        // arrives from the socket: the other two must be decrypted from what was read.
        let client = PlaintextRecorder(answering: "ready", with: payload)
        try connectClient(port: listener.value.address.port, on: first) { $0.delegate = client }
        XCTAssertTrue(client.waitFor("got \(payload.count)"), client.text)
        XCTAssertTrue(client.text.hasPrefix("readymoved"), "the server writes from its new loop: \(client.text)")
        XCTAssertTrue(server.received.value == payload, "all \(payload.count) bytes in order (got \(server.received.value.count))")
        let loops = server.readLoops.value
        XCTAssertEqual(loops.first, 0)
        XCTAssertGreaterThan(loops.count, 1)
        XCTAssertEqual(Set(loops.dropFirst()), [1], "every read after the first is on the target loop")
    }

    func testSmallWritesMadeInOneIterationLeaveAsOneTLSRecord() throws {
        let loop = group.loops[0]
        let server = BurstOnRequest(smallWrites: 100)
        let listener = try tlsListener(on: loop) { $0.delegate = server }
        defer { _ = try? loop.submitAndWait { listener.value.close() } }

        let client = PlaintextRecorder()
        let counter = UncheckedBox(RecordCounter())
        try connectClient(port: listener.value.address.port, on: loop) { tls in
            tls.delegate = client
            // The counter sees the ciphertext on its way from the socket to OpenSSL.
            counter.value.tls = tls
            tls.tcp.delegate = counter.value
            tls.write(Array("ping".utf8))
        }
        // Session tickets and the answer to the first request are out of the way first.
        XCTAssertTrue(client.waitFor("pong"), client.text)
        try loop.submitAndWait {
            counter.value.reset()
            counter.value.tls?.write(Array("go".utf8))
        }
        XCTAssertTrue(client.waitFor("pong" + String(repeating: "x", count: 1000)), client.text)
        let records = try loop.submitAndWait { counter.value.applicationRecords }
        XCTAssertEqual(records, 1, "100 writes in one iteration, one SSL_write, one record")
    }

    // MARK: Raw TLS over loopback

    /// A TLS listener on `loop`; each accepted connection is set up by `accepted` there.
    private func tlsListener(on loop: EventLoop, accepted: @escaping @Sendable (TLSConnection) -> Void) throws -> UncheckedBox<TCPListener> {
        let context = self.context!
        return try loop.submitAndWait {
            UncheckedBox(try TCPListener(loop: loop, address: try SocketAddress(host: "127.0.0.1", port: 0)) { fd, peer in
                guard let tcp = try? TCPConnection(fd: fd, loop: loop, peer: peer), let tls = try? TLSConnection(server: context, over: tcp) else {
                    return XCTFail("accept")
                }
                accepted(tls)
            })
        }
    }

    /// Connects a TLS client (trusting the test CA, expecting "localhost") and sets it up on `loop`.
    private func connectClient(port: UInt16, on loop: EventLoop, _ setUp: @escaping @Sendable (TLSConnection) -> Void) throws {
        let trusted = try TLSClientContext(caFile: pki.path("ca.pem"))
        let connected: Bool = try waitFor { done in
            TCPConnector.connect(host: "127.0.0.1", port: port, on: loop) { result in
                guard case let .success(tcp) = result, let tls = try? TLSConnection(client: trusted, serverName: "localhost", over: tcp) else {
                    return done(false)
                }
                setUp(tls)
                done(true)
            }
        }
        XCTAssertTrue(connected, "TLS client connected")
    }
}

/// Hands each upgraded socket to the other loop before the WebSocket starts on it.
private final class HandoffApplication: HTTPServerDelegate, @unchecked Sendable {
    let group: EventLoopGroup
    let moves = Locked<[(from: Int, to: Int)]>([])

    init(group: EventLoopGroup) { self.group = group }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        .accept { [self] transport, leftover in
            let from = transport.loop.index
            transport.handoff(to: group.loops[(from + 1) % group.loops.count]) { [self] moved in
                moves.mutate { $0.append((from, moved.loop.index)) }
                _ = WebSocketConnection(connection: moved, role: .server, delegate: EchoSocket.shared, leftover: leftover)
            }
        }
    }
}

/// Server side: hands the connection to `target` on its first read, says "moved" from there,
/// and "got N" once all the expected bytes are in; records on which loop each read came.
private final class HandoffOnFirstRead: TransportDelegate, @unchecked Sendable {
    let target: EventLoop
    let expected: Int
    let received = Locked<[UInt8]>([])
    let readLoops = Locked<[Int]>([])

    init(target: EventLoop, expecting expected: Int) {
        self.target = target
        self.expected = expected
    }

    func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        readLoops.mutate { $0.append(connection.loop.index) }
        received.mutate { $0 += bytes }
        if connection.loop !== target {
            connection.handoff(to: target) { $0.write(Array("moved".utf8)) }
        } else if received.value.count == expected {
            connection.write(Array("got \(expected)".utf8))
        }
    }

    func transportDidClose(_ connection: any Transport, error: NetError?) {}
}

/// Server side: answers "ping" with "pong", and "go" with many small writes in one iteration.
private final class BurstOnRequest: TransportDelegate, @unchecked Sendable {
    let smallWrites: Int

    init(smallWrites: Int) { self.smallWrites = smallWrites }

    func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        switch String(decoding: bytes, as: UTF8.self) {
        case "ping": connection.write(Array("pong".utf8))
        case "go":
            // Half plain writes, half header-and-payload writes (as WebSocket frames go out).
            for i in 0..<smallWrites {
                if i.isMultiple(of: 2) {
                    connection.write([UInt8](repeating: UInt8(ascii: "x"), count: 10))
                } else {
                    withUnsafeBytes(of: (UInt8(ascii: "x"), UInt8(ascii: "x"))) {
                        connection.write(header: $0, payload: [UInt8](repeating: UInt8(ascii: "x"), count: 8))
                    }
                }
            }
        default: XCTFail("unexpected request")
        }
    }

    func transportDidClose(_ connection: any Transport, error: NetError?) {}
}

/// Client side: the plaintext received, as text; optionally answers a cue with bytes.
private final class PlaintextRecorder: TransportDelegate, @unchecked Sendable {
    private let received = Locked<String>("")
    private var answer: (cue: String, bytes: [UInt8])?

    init(answering cue: String? = nil, with bytes: [UInt8] = []) {
        answer = cue.map { ($0, bytes) }
    }

    var text: String { received.value }

    func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        received.mutate { $0 += String(decoding: bytes, as: UTF8.self) }
        if let answer, text.hasSuffix(answer.cue) {
            self.answer = nil
            connection.write(answer.bytes)
        }
    }

    func transportDidClose(_ connection: any Transport, error: NetError?) {}

    /// Waits up to 10 s for the text to end with `suffix`.
    func waitFor(_ suffix: String) -> Bool {
        Eventually.holds(within: 10, every: 0.005) { text.hasSuffix(suffix) }
    }
}

/// Sits between a TLS connection and its TCP connection and counts the application-data
/// records (content type 23) passing from the socket to OpenSSL.
private final class RecordCounter: TransportDelegate {
    weak var tls: TLSConnection?
    private(set) var applicationRecords = 0
    private var header: [UInt8] = []
    private var bodyLeft = 0

    func reset() { applicationRecords = 0 }

    func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        var i = 0
        while i < bytes.count {
            if bodyLeft > 0 {
                let step = min(bodyLeft, bytes.count - i)
                bodyLeft -= step
                i += step
                continue
            }
            header.append(bytes[i])
            i += 1
            if header.count == 5 {
                if header[0] == 23 { applicationRecords += 1 }
                bodyLeft = Int(header[3]) << 8 | Int(header[4])
                header = []
            }
        }
        tls?.transport(connection, didRead: bytes)
    }

    func transportDidClose(_ connection: any Transport, error: NetError?) { tls?.transportDidClose(connection, error: error) }
    func transportWritabilityChanged(_ connection: any Transport) { tls?.transportWritabilityChanged(connection) }
}
