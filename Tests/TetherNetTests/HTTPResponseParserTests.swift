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
}
