import TetherNet
import XCTest

final class HTTPResponseParserTests: XCTestCase {
    private func head(_ length: Int) -> [UInt8] {
        let start = "HTTP/1.1 200 OK\r\nX: "
        return Array((start + String(repeating: "a", count: length - start.utf8.count) + "\r\n\r\n").utf8)
    }

    /// The head limit holds however the head arrives: before, a head that came in one read was
    /// never measured, so any size passed (found by fuzzing, Fuzz/HTTPResponse).
    func testAHeadBeyondTheLimitIs431EvenWhenItArrivesInOneRead() {
        var parser = HTTPResponseParser(maxHeadBytes: 64)
        parser.feed(head(65))
        XCTAssertThrowsError(try parser.parseHead()) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 431) }
    }

    /// …and a head of exactly the limit parses even byte by byte, while the last bytes of its
    /// CRLFCRLF are still on the way.
    func testAHeadOfExactlyTheLimitParsesEvenWhenItArrivesByteByByte() throws {
        var parser = HTTPResponseParser(maxHeadBytes: 64)
        var parsed: HTTPResponseParser.Head?
        for byte in head(64) {
            parser.feed([byte])
            parsed = try parser.parseHead()
        }
        XCTAssertEqual(parsed?.status, 200)
        XCTAssertEqual(parsed?.headers["X"], String(repeating: "a", count: 44))
    }

    /// Trailers are held to the head limit before their closing CRLFCRLF, however they arrive:
    /// in one read a long trailer section passed, byte by byte it threw (found by fuzzing,
    /// Fuzz/HTTPResponse/corpus/regression-split-trailers).
    func testTheTrailerLimitHoldsTheSameWholeOrByteByByte() throws {
        func outcome(_ trailers: String, byteByByte: Bool) -> String {
            var parser = HTTPResponseParser(maxHeadBytes: 64)
            let bytes = Array(("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" + trailers).utf8)
            do {
                var body: [UInt8]?
                for piece in byteByByte ? bytes.map({ [$0] }) : [bytes] {
                    parser.feed(piece)
                    _ = try parser.parseHead()
                    body = try parser.body(closed: false)
                    if body != nil { break }
                }
                return body.map { String(decoding: $0, as: UTF8.self) } ?? "incomplete"
            } catch { return "\((error as? HTTPParseError)?.status ?? 0)" }
        }
        let within = "X: " + String(repeating: "t", count: 61) + "\r\n\r\n" + String(repeating: "z", count: 100)
        let beyond = "X: " + String(repeating: "t", count: 62) + "\r\n\r\n"
        for byteByByte in [false, true] {
            XCTAssertEqual(outcome(within, byteByByte: byteByByte), "ok", "64 bytes of trailers before the empty line, then more bytes")
            XCTAssertEqual(outcome(beyond, byteByByte: byteByByte), "431", "65 bytes of trailers")
            XCTAssertEqual(outcome("\r\n", byteByByte: byteByByte), "ok", "no trailers")
        }
    }

    private func chunked(_ body: String) throws -> [UInt8]? {
        var parser = HTTPResponseParser()
        parser.feed(Array(("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body).utf8))
        _ = try parser.parseHead()
        return try parser.body(closed: false)
    }

    /// A chunk size is 1-15 hex digits, as the request parser reads it: `7fffffffffffffff` made
    /// the offset arithmetic trap (found while fuzzing, Fuzz/HTTPResponse), and a sign is no digit.
    func testChunkSizesAreShortPureHex() throws {
        XCTAssertEqual(try chunked("5;ext=1\r\nhello\r\n0\r\n\r\n"), Array("hello".utf8))
        for size in ["7fffffffffffffff", "1000000000000000", "+5", "-0", " 5", ""] {
            XCTAssertThrowsError(try chunked("\(size)\r\nhello\r\n0\r\n\r\n"), size) {
                XCTAssertEqual(($0 as? HTTPParseError)?.status, 400, size)
            }
        }
    }

    /// The CRLF after a chunk's data is checked, not skipped: `helloXX` is no chunk of five.
    func testAChunkMustEndWithCRLF() {
        XCTAssertThrowsError(try chunked("5\r\nhelloXX0\r\n\r\n")) {
            XCTAssertEqual($0 as? HTTPParseError, HTTPParseError(status: 400, "chunk not followed by CRLF"))
        }
    }

    /// A server cannot make the client buffer without end: a size line is at most 1 KiB, the
    /// trailers at most the head limit, and a chunk whose declared size passes the body limit is
    /// refused before its data arrives. Before, all three were held until the timeout.
    func testAChunkedBodyCannotMakeTheClientBufferPastItsLimits() {
        var parser = HTTPResponseParser(maxHeadBytes: 100, maxBodyBytes: 1000)
        parser.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        _ = try? parser.parseHead()
        var line = parser
        line.feed(Array(("1;" + String(repeating: "x", count: 1100)).utf8))
        XCTAssertThrowsError(try line.body(closed: false)) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 400) }
        var trailers = parser
        trailers.feed(Array(("0\r\nX: " + String(repeating: "t", count: 200)).utf8))
        XCTAssertThrowsError(try trailers.body(closed: false)) { XCTAssertEqual(($0 as? HTTPParseError)?.status, 431) }
        var declared = parser
        declared.feed(Array("3e9\r\nabc".utf8))
        XCTAssertThrowsError(try declared.body(closed: false)) { XCTAssertEqual($0 as? HTTPParseError, HTTPParseError(status: 413, "payload too large")) }
    }

    /// Chunks decoded on earlier reads are not decoded again: the body comes out whole however
    /// many reads it took.
    func testAChunkedBodyArrivingInManyReadsComesOutWhole() throws {
        var parser = HTTPResponseParser()
        parser.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        _ = try parser.parseHead()
        var expected: [UInt8] = []
        for n in 0..<200 {
            let chunk = [UInt8](repeating: UInt8(n & 0x7F), count: n % 7 + 1)
            expected += chunk
            parser.feed(Array((String(chunk.count, radix: 16) + "\r\n").utf8) + chunk + [0x0D])
            XCTAssertNil(try parser.body(closed: false))
            parser.feed([0x0A])
            XCTAssertNil(try parser.body(closed: false))
        }
        parser.feed(Array("0\r\n\r\n".utf8))
        XCTAssertEqual(try parser.body(closed: false), expected)
    }
}
