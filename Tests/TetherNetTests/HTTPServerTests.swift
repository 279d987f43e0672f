import Foundation
import TetherNet
import TetherTestSupport
import XCTest

final class HTTPServerTests: XCTestCase {
    private var group: EventLoopGroup!
    private var server: HTTPServer!
    private var port: UInt16 = 0

    override func setUpWithError() throws {
        group = try EventLoopGroup(count: 2)
        var configuration = HTTPServer.Configuration()
        configuration.requestTimeout = .milliseconds(500)
        configuration.idleTimeout = .seconds(2)
        server = HTTPServer(group: group, configuration: configuration, delegate: EchoApplication())
        port = try server.start()
    }

    override func tearDown() {
        server.stopAccepting()
        group.shutdown()
    }

    private func curl(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess("/usr/bin/curl", ["-sS", "--max-time", "10"] + arguments)
    }

    func testCurlPostsAndGetsAnEchoOverKeepAlive() throws {
        let result = try curl(["-w", "%{http_code}\\n", "--data-binary", "hello curl", "http://127.0.0.1:\(port)/echo",
                               "--next", "-w", "%{http_code} %{num_connects}\\n", "http://127.0.0.1:\(port)/nothing"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "hello curl200\nno route GET /nothing404 0\n", "second request reused the connection")
    }

    func testCurlChunkedUploadIsDecoded() throws {
        let result = try curl(["-H", "Transfer-Encoding: chunked", "--data-binary", "chunked body", "http://127.0.0.1:\(port)/echo"])
        XCTAssertEqual(result.stdout, "chunked body")
    }

    func testRouteBodyCapAnswers413() throws {
        let result = try curl(["-w", "%{http_code}", "-o", "/dev/null", "--data-binary", "more than ten bytes", "http://127.0.0.1:\(port)/small"])
        XCTAssertEqual(result.stdout, "413")
    }

    func testAScreenedRequestIsAnsweredOnItsHeadWithoutWaitingForItsBody() throws {
        let client = try RawClient(port: port)
        client.send("POST /screened HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000\r\n\r\n")
        let text = client.readText()
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), text)
        XCTAssertTrue(text.contains("Connection: close\r\n"), "the unread body cannot be skipped, so the connection closes")
        XCTAssertTrue(text.hasSuffix("\r\n\r\nscreened"), text)
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let client = try RawClient(port: port)
        client.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nAPOST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nBGET /headers HTTP/1.1\r\nHost: h\r\nX-Dup: 1\r\nx-dup: 2\r\nConnection: close\r\n\r\n")
        let text = client.readText()
        let bodies = text.components(separatedBy: "\r\n\r\n").dropFirst().map { $0.prefix(3) }
        XCTAssertEqual(bodies.map { String($0.prefix(1)) }, ["A", "B", "1"], text)
        XCTAssertTrue(text.hasSuffix("1|2"), "duplicates preserved in order")
    }

    func testMalformedRequestGetsItsStatusAndTheServerKeepsServing() throws {
        let cases: [(String, String)] = [
            ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "400"),
            ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", "400"),
            ("GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 17_000) + "\r\n\r\n", "431"),
            ("GET / HTTP/1.1\r\nHost: h\r\n" + (0..<101).map { "X-\($0): v\r\n" }.joined() + "\r\n", "431"),
            ("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 70000\r\n\r\n", "413"),
            ("GET / HTTP/9.9\r\nHost: h\r\n\r\n", "505"),
        ]
        for (request, status) in cases {
            let client = try RawClient(port: port)
            client.send(request)
            let response = client.readText()
            XCTAssertTrue(response.hasPrefix("HTTP/1.1 \(status) "), "\(status): \(response.prefix(80))")
            XCTAssertTrue(response.contains("Connection: close"))
        }
        let ok = try curl(["--data-binary", "still here", "http://127.0.0.1:\(port)/echo"])
        XCTAssertEqual(ok.stdout, "still here")
    }

    func testSlowSenderGets408() throws {
        let client = try RawClient(port: port)
        client.send("GET /echo HTTP/1.1\r\nHost: h\r\n")   // never finishes the head
        let response = client.readText()
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 408 "), response)
    }

    func testIdleKeepAliveConnectionIsClosed() throws {
        let client = try RawClient(port: port)
        let started = Date()
        XCTAssertEqual(client.readAll(), [])
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.5)
    }
}

final class GracefulShutdownTests: XCTestCase {
    /// The echo application, telling the test when a request's head has been parsed.
    final class WatchedEcho: HTTPServerDelegate, @unchecked Sendable {
        let echo = EchoApplication()
        let headSeen = DispatchSemaphore(value: 0)
        func bodyLimit(for head: HTTPRequestHead) -> Int {
            if head.method == "POST" { headSeen.signal() }
            return echo.bodyLimit(for: head)
        }
        func respond(to request: HTTPServerRequest) -> HTTPResponse { echo.respond(to: request) }
    }

    func testShutdownClosesIdleConnectionsFinishesRequestsInFlightAndRefusesNewOnes() throws {
        let group = try EventLoopGroup(count: 2)
        defer { group.shutdown() }
        let app = WatchedEcho()
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: app)
        let port = try server.start()

        let idle = try RawClient(port: port)
        idle.send("GET /none HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertTrue(String(decoding: idle.read(atLeast: 20), as: UTF8.self).hasPrefix("HTTP/1.1 404"))
        let busy = try RawClient(port: port)
        busy.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n01234")   // half a body
        // Once the server has parsed the head, the request counts as in flight.
        XCTAssertEqual(app.headSeen.wait(timeout: .now() + 10), .success)

        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            // A grace far beyond the test's own waits: on a loaded machine the steps below can
            // take seconds, and a grace that ran out would force-close the request in flight.
            server.shutdown(grace: .seconds(60))
            done.signal()
        }
        XCTAssertEqual(idle.readAll(), [], "the idle kept-alive connection is closed at once")
        eventually("the listener closed", within: 5) { (try? RawClient(port: port)) == nil }
        XCTAssertThrowsError(try RawClient(port: port), "no new connections")
        busy.send("56789")
        let answer = busy.readText()
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 OK"), answer)
        XCTAssertTrue(answer.contains("Connection: close"))
        XCTAssertTrue(answer.hasSuffix("0123456789"))
        XCTAssertEqual(done.wait(timeout: .now() + 3), .success, "shutdown returns once every connection is gone")
    }

    func testShutdownForceClosesWhatOutlivesTheGracePeriod() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let app = WatchedEcho()
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: app)
        let port = try server.start()
        let stuck = try RawClient(port: port)
        stuck.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n012")
        // Once the server has parsed the head, the request counts as in flight.
        XCTAssertEqual(app.headSeen.wait(timeout: .now() + 10), .success)
        let started = Date()
        server.shutdown(grace: .milliseconds(300))
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        XCTAssertEqual(stuck.readAll(), [])
    }
}

final class IPv6Tests: XCTestCase {
    func testServesOverIPv6Loopback() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = HTTPServer.Configuration()
        configuration.host = "::1"
        let server = HTTPServer(group: group, configuration: configuration, delegate: EchoApplication())
        let port = try server.start()
        defer { server.stopAccepting() }
        let result = try runProcess("/usr/bin/curl", ["-sS", "-g", "--max-time", "5", "--data-binary", "v6", "http://[::1]:\(port)/echo"])
        XCTAssertEqual(result.stdout, "v6", result.stderr)
        XCTAssertEqual(try SocketAddress(host: "::1", port: 1).description, "[::1]:1")
        XCTAssertTrue(try SocketAddress(host: "::1", port: 1).isLoopback)
        XCTAssertThrowsError(try SocketAddress(host: "localhost", port: 1), "names are not addresses")
    }
}

final class AsyncReplyTests: XCTestCase {
    final class SlowApp: HTTPServerDelegate, @unchecked Sendable {
        func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
            if request.head.path == "/slow" {
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { reply(.text(200, "slow")) }
            } else {
                reply(.text(200, "fast"))
            }
        }
    }

    func testRepliesFromAnotherThreadKeepPipelinedOrder() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: SlowApp())
        let port = try server.start()
        defer { server.stopAccepting() }
        let client = try RawClient(port: port)
        client.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\nGET /fast HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        let text = client.readText()
        let slow = try XCTUnwrap(text.range(of: "slow")), fast = try XCTUnwrap(text.range(of: "fast"))
        XCTAssertLessThan(slow.lowerBound, fast.lowerBound, text)
    }
}
