import TetherNet
import XCTest

final class HTTPRequestParserTests: XCTestCase {
    private func parse(_ text: String, limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits(),
                       bodyLimit: Int? = nil) throws -> [HTTPRequestParser.Event] {
        var parser = HTTPRequestParser(limits: limits)
        parser.feed(Array(text.utf8))
        var events: [HTTPRequestParser.Event] = []
        while let event = try parser.next() {
            events.append(event)
            if case .head = event, let bodyLimit { parser.bodyLimit = bodyLimit }
        }
        return events
    }

    private func assertStatus(_ text: String, _ status: Int, limits: HTTPRequestParser.Limits = HTTPRequestParser.Limits(),
                              bodyLimit: Int? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(text, limits: limits, bodyLimit: bodyLimit), file: file, line: line) {
            XCTAssertEqual(($0 as? HTTPParseError)?.status, status, "\($0)", file: file, line: line)
        }
    }

    func testParsesARequestWithContentLengthBody() throws {
        let events = try parse("POST /register?x=1 HTTP/1.1\r\nHost: relay\r\nX-Relay-Room: abc\r\nx-relay-room: def\r\nContent-Length: 5\r\n\r\nhello")
        guard case let .head(head) = events.first else { return XCTFail("no head") }
        XCTAssertEqual(head.method, "POST")
        XCTAssertEqual(head.target, "/register?x=1")
        XCTAssertEqual(head.path, "/register")
        XCTAssertEqual(head.headers["X-RELAY-ROOM"], "abc", "case-insensitive lookup")
        XCTAssertEqual(head.headers.values("x-relay-room"), ["abc", "def"], "duplicates preserved in order")
        XCTAssertTrue(head.keepAlive)
        XCTAssertEqual(events.last, .body(Array("hello".utf8)))
    }

    func testDecodesChunkedBodiesWithExtensionsAndTrailers() throws {
        let events = try parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
        XCTAssertEqual(events.last, .body(Array("hello world".utf8)))
    }

    func testPipelinedRequestsComeOutInOrderWithBytesSplitAnywhere() throws {
        let text = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        for split in [1, 2, 3, 7, 13] {
            var parser = HTTPRequestParser()
            var targets: [String] = [], bodies: [[UInt8]] = []
            var offset = 0
            let bytes = Array(text.utf8)
            while offset < bytes.count {
                parser.feed(bytes[offset..<min(offset + split, bytes.count)])
                offset += split
                while let event = try parser.next() {
                    switch event {
                    case let .head(head): targets.append(head.target)
                    case let .body(body): bodies.append(body)
                    }
                }
            }
            XCTAssertEqual(targets, ["/a", "/b", "/c"], "split \(split)")
            XCTAssertEqual(bodies, [[], Array("hi".utf8), []])
            XCTAssertTrue(parser.isIdle)
        }
    }

    func testKeepAliveFollowsVersionAndConnectionHeader() throws {
        func head(_ text: String) throws -> HTTPRequestHead {
            guard case let .head(h)? = try parse(text).first else { throw HTTPParseError(status: 0, "no head") }
            return h
        }
        XCTAssertFalse(try head("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").keepAlive)
        XCTAssertFalse(try head("GET / HTTP/1.0\r\n\r\n").keepAlive)
        XCTAssertTrue(try head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keepAlive)
        XCTAssertTrue(try head("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n").isWebSocketUpgrade)
    }

    // MARK: Rules, each refused with its status

    func testHeadBeyond16KiBIs431() {
        let big = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + String(repeating: "a", count: 16 * 1024) + "\r\n\r\n"
        assertStatus(big, 431)
        // Even before the head ends: a slow sender cannot make the buffer grow past the cap.
        var parser = HTTPRequestParser()
        parser.feed(Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 17 * 1024)).utf8))
        XCTAssertThrowsError(try parser.next()) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 431) }
    }

    /// A head of exactly the limit (before its final CRLFCRLF) parses however the reads split it:
    /// byte by byte, the last bytes of its CRLFCRLF arrive when the buffer already holds more
    /// than the limit (found by fuzzing, Fuzz/HTTPRequest). One byte more is 431 either way.
    func testAHeadOfExactlyTheLimitParsesEvenWhenItArrivesByteByByte() throws {
        var limits = HTTPRequestParser.Limits()
        limits.maxHeadBytes = 64
        let start = "GET / HTTP/1.1\r\nHost: h\r\nX: "
        func head(_ length: Int) -> [UInt8] { Array((start + String(repeating: "a", count: length - start.utf8.count) + "\r\n\r\n").utf8) }
        func byteByByte(_ bytes: [UInt8]) throws -> HTTPRequestParser.Event? {
            var parser = HTTPRequestParser(limits: limits)
            for byte in bytes {
                parser.feed([byte])
                if let event = try parser.next() { return event }
            }
            return nil
        }
        var whole = HTTPRequestParser(limits: limits)
        whole.feed(head(64))
        let event = try XCTUnwrap(try whole.next())
        XCTAssertEqual(try byteByByte(head(64)), event)
        XCTAssertThrowsError(try byteByByte(head(65))) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 431) }
        assertStatus(String(decoding: head(65), as: UTF8.self), 431, limits: limits)
    }

    func testMoreThan100HeadersIs431() {
        let headers = (0..<101).map { "X-\($0): v\r\n" }.joined()
        assertStatus("GET / HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n", 431)
        XCTAssertNoThrow(try parse("GET / HTTP/1.1\r\nHost: h\r\n" + (0..<99).map { "X-\($0): v\r\n" }.joined() + "\r\n"))
    }

    func testDeclaredBodyAboveTheRouteCapIs413BeforeTheBodyArrives() {
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65537\r\n\r\n", 413)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", 413, bodyLimit: 10)
        XCTAssertNoThrow(try parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", bodyLimit: 10))
    }

    func testChunkedBodyStreamingPastTheCapIs413() {
        let chunk = String(repeating: "a", count: 0x8000)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8000\r\n\(chunk)\r\n8000\r\n\(chunk)\r\n1\r\na\r\n0\r\n\r\n", 413)
    }

    func testConflictingContentLengthAndTransferEncodingIs400() {
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400)
    }

    func testDuplicateContentLengthIs400EvenWhenEqual() {
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", 400)
    }

    func testMalformedContentLengthIs400() {
        for value in ["-1", "+3", "3a", "", " ", "0x10", "99999999999999999999"] {
            assertStatus("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \(value)\r\n\r\n", 400)
        }
    }

    func testTransferCodingsOtherThanChunkedAreRefused() {
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501)
        assertStatus("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400)
    }

    func testMalformedChunksAre400() {
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400)
        assertStatus("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400)
    }

    func testObsoleteFoldingBareLFAndSpaceBeforeColonAre400() {
        assertStatus("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n folded\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\nHost: h\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\u{0}b\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\r\nHost: h\r\n\u{7f}bad: v\r\n\r\n", 400)
    }

    /// A head with LF line ends never has the CRLFCRLF that would end it: it is refused at the
    /// first bare LF, not held until the head timeout.
    func testABareLFIsRefusedTheMomentItArrivesEvenBeforeTheHeadEnds() {
        for partial in ["GET / HTTP/1.1\n", "GET / HTTP/1.1\r\nHost: h\n", "GET /healthz HTTP/1.1\nHost: x\n\n", "\n"] {
            var parser = HTTPRequestParser()
            parser.feed(Array(partial.utf8))
            XCTAssertThrowsError(try parser.next(), partial.debugDescription) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 400) }
        }
        var parser = HTTPRequestParser()
        parser.feed(Array("GET / HTTP/1.1\r\nHost: h\r\n".utf8))
        XCTAssertNil(try parser.next(), "CRLF lines wait for the rest of the head")
        parser.feed(Array("\r\n".utf8))
        XCTAssertNotNil(try parser.next())
    }

    func testRequestLineRules() {
        assertStatus("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n", 400)
        assertStatus("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET /\u{e9} HTTP/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505)
        assertStatus("GET / HTTQ/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400)
        assertStatus("GET / \r\nHost: h\r\n\r\n", 400)
        assertStatus(" / HTTP/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET  HTTP/1.1\r\nHost: h\r\n\r\n", 400)
        assertStatus("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400)
    }

    func testFieldsKeepTheirOrderNamesAndValuesWithoutOptionalWhitespace() throws {
        var parser = HTTPRequestParser()
        parser.feed(Array("GET /a?b HTTP/1.0\r\nX: 1\r\nhost:\t h \t\r\nX:2\r\nEmpty:\r\n\r\n".utf8))
        guard case let .head(head)? = try parser.next() else { return XCTFail("no head") }
        XCTAssertEqual(head.method, "GET")
        XCTAssertEqual(head.target, "/a?b")
        XCTAssertEqual(head.version, .http10)
        XCTAssertEqual(head.headers.fields.map { "\($0.name)=\($0.value)" }, ["X=1", "host=h", "X=2", "Empty="])
        XCTAssertEqual(head.headers.values("x"), ["1", "2"])
        XCTAssertNil(head.headers.only("X"), "repeated")
        XCTAssertEqual(head.headers.only("HOST"), "h")
        XCTAssertNil(head.headers.only("Absent"))
        XCTAssertEqual(head.headers.only("empty"), "")
    }

    func testAHeadWithoutFieldsIsARequestLineAlone() throws {
        var parser = HTTPRequestParser()
        parser.feed(Array("OPTIONS * HTTP/1.0\r\n\r\n".utf8))
        guard case let .head(head)? = try parser.next() else { return XCTFail("no head") }
        XCTAssertEqual(head.method, "OPTIONS")
        XCTAssertEqual(head.target, "*")
        XCTAssertEqual(head.headers.count, 0)
    }

    func testAFailedParserStaysFailed() {
        var parser = HTTPRequestParser()
        parser.feed(Array("BAD\r\n\r\n".utf8))
        XCTAssertThrowsError(try parser.next())
        parser.feed(Array("GET / HTTP/1.1\r\nHost: h\r\n\r\n".utf8))
        XCTAssertThrowsError(try parser.next())
    }

    func testUpgradeRequestHandsOverTheBytesThatFollow() throws {
        var parser = HTTPRequestParser()
        parser.feed(Array("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".utf8) + [0x81, 0x80])
        guard case .head? = try parser.next() else { return XCTFail("no head") }
        XCTAssertEqual(parser.takeUnparsed(), [0x81, 0x80])
    }

    func testResponseSerialisation() {
        let response = HTTPResponse.text(403, "forbidden")
        XCTAssertEqual(String(decoding: response.serialized(closing: true), as: UTF8.self),
                       "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\nforbidden")
        XCTAssertEqual(String(decoding: HTTPResponse(status: 101).serialized(), as: UTF8.self), "HTTP/1.1 101 Switching Protocols\r\n\r\n")
        XCTAssertEqual(String(decoding: response.serialized(includeBody: false), as: UTF8.self),
                       "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\n")
        var headers = HTTPHeaders([("Content-Length", "7"), ("Connection", "keep-alive"), ("X-A", "b")])
        let large = HTTPResponse(status: 599, headers: headers, body: Array(repeating: 0x61, count: 1_234_567)).serialized(closing: true)
        XCTAssertEqual(String(decoding: large.dropLast(1_234_567), as: UTF8.self),
                       "HTTP/1.1 599 Status 599\r\nX-A: b\r\nContent-Length: 1234567\r\nConnection: close\r\n\r\n", "computed length, one Connection")
        XCTAssertEqual(large.suffix(1_234_567), ArraySlice(repeating: 0x61, count: 1_234_567))
        headers.remove("Content-Length")
        XCTAssertEqual(String(decoding: HTTPResponse(status: 200, headers: headers).serialized(), as: UTF8.self),
                       "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-A: b\r\nContent-Length: 0\r\n\r\n")
        XCTAssertEqual(String(decoding: HTTPResponse(status: 204, body: [1]).serialized(), as: UTF8.self).prefix(30), "HTTP/1.1 204 No Content\r\n\r\n\u{1}")
    }
}
