import Foundation
import TetherNet
import TetherTestSupport
import XCTest

/// Collects what a client WebSocket receives.
final class Inbox: WebSocketDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    private let arrived = DispatchSemaphore(value: 0)

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) { add("text:" + String(decoding: text, as: UTF8.self)) }
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) { add("binary:\(data.count)") }
    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) { add("close:\(code):\(reason)") }

    private func add(_ item: String) {
        lock.withLock { items.append(item) }
        arrived.signal()
    }

    /// The next item, waiting up to 5 s.
    func next() -> String? {
        guard arrived.wait(timeout: .now() + 5) == .success else { return nil }
        return lock.withLock { items.removeFirst() }
    }
}

final class ClientTests: XCTestCase {
    private var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    private func connect(_ url: String, headers: HTTPHeaders = HTTPHeaders(), inbox: Inbox) throws -> WebSocketConnection {
        try waitFor { WebSocketClient.connect(url, headers: headers, delegate: inbox, on: group.loops[0], completion: $0) }.get()
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) { group.loops[0].execute(body) }

    func testTetherClientTalksToPythonWebsocketsServer() throws {
        let peer = try PythonPeerProcess(script: "ws_echo_server.py")
        let inbox = Inbox()
        let socket = UncheckedBox(try connect("ws://127.0.0.1:\(peer.port)/room", headers: HTTPHeaders([("x-relay-room", "abc"), ("User-Agent", "iTerm2Companion")]), inbox: inbox))
        onLoop { socket.value.send(text: Array("hello".utf8)) }
        XCTAssertEqual(inbox.next(), "text:hello")
        onLoop { socket.value.send(binary: [UInt8](repeating: 3, count: 70_000)) }
        XCTAssertEqual(inbox.next(), "binary:70000")
        onLoop { socket.value.send(text: Array("headers?".utf8)) }
        let headers = try XCTUnwrap(inbox.next())
        XCTAssertTrue(headers.contains("\"x-relay-room\": \"abc\""), headers)
        XCTAssertTrue(headers.contains("\"user-agent\": \"iTerm2Companion\""), headers)
        XCTAssertFalse(headers.contains("\"origin\""), "no Origin header is ever sent")
        onLoop { socket.value.send(text: Array("close-4001".utf8)) }
        XCTAssertEqual(inbox.next(), "close:4001:asked")
    }

    func testTetherClientAgainstTetherServerAndARefusedUpgrade() throws {
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: EchoApplication())
        let port = try server.start()
        defer { server.stopAccepting() }
        let inbox = Inbox()
        let socket = UncheckedBox(try connect("ws://127.0.0.1:\(port)/", inbox: inbox))
        onLoop { socket.value.send(text: Array("ping".utf8)) }
        XCTAssertEqual(inbox.next(), "text:ping")
        onLoop { socket.value.close(code: 1000, reason: "done") }
        XCTAssertEqual(inbox.next(), "close:1000:")

        let refused = try waitFor {
            WebSocketClient.connect("ws://127.0.0.1:\(port)/", headers: HTTPHeaders([("Origin", "https://x")]), delegate: inbox, on: group.loops[0], completion: $0)
        }
        guard case let .failure(.refused(status, _)) = refused else { return XCTFail("not refused: \(refused)") }
        XCTAssertEqual(status, 403)
    }

    func testHTTPClientGetsPostsAndNeverFollowsRedirects() throws {
        final class App: HTTPServerDelegate, @unchecked Sendable {
            func respond(to request: HTTPServerRequest) -> HTTPResponse {
                if request.head.path == "/moved" { return HTTPResponse(status: 302, headers: HTTPHeaders([("Location", "/elsewhere")])) }
                return .json(200, request.body.isEmpty ? Array("{}".utf8) : request.body)
            }
        }
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: App())
        let port = try server.start()
        defer { server.stopAccepting() }
        func call(_ method: String, _ path: String, body: [UInt8]? = nil) throws -> HTTPClient.Response {
            try waitFor { HTTPClient.request(method, "http://127.0.0.1:\(port)\(path)", body: body, on: group.loops[0], completion: $0) }.get()
        }
        let posted = try call("POST", "/x", body: Array(#"{"a":1}"#.utf8))
        XCTAssertEqual(posted.status, 200)
        XCTAssertEqual(posted.body, Array(#"{"a":1}"#.utf8))
        XCTAssertEqual(posted.headers["Content-Type"], "application/json")
        let moved = try call("GET", "/moved")
        XCTAssertEqual(moved.status, 302, "the redirect is the final answer")
        XCTAssertEqual(moved.headers["Location"], "/elsewhere")
    }

    func testConnectFailuresAndTimeoutsAreReported() throws {
        let refused = try waitFor { TCPConnector.connect(host: "127.0.0.1", port: 1, on: group.loops[0], completion: $0) }
        guard case .failure = refused else { return XCTFail("connected to port 1") }
        let unresolved = try waitFor { TCPConnector.connect(host: "no-such-host.invalid", port: 80, on: group.loops[0], completion: $0) }
        guard case .failure = unresolved else { return XCTFail("resolved .invalid") }
    }
}

/// A long-running Python peer that prints "PORT n" when ready.
final class PythonPeerProcess {
    let process = Process()
    let port: UInt16
    private let input = Pipe()

    init(script: String) throws {
        process.executableURL = PythonPackageVectors.virtualenv.appendingPathComponent("bin/python")
        process.arguments = [Vectors.packageRoot().appendingPathComponent("Tests/Peers/\(script)").path]
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        let text = output.fileHandleForReading.readFirstLine().trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("PORT "), let port = UInt16(text.dropFirst(5)) else { throw NetError.invalidAddress("peer said \(text)") }
        self.port = port
    }

    deinit {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
