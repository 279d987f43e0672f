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
}
