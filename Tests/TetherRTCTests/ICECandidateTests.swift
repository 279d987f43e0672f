import TetherRTC
import TetherTestSupport
import XCTest

/// The candidate attribute value (RFC 8839 §5.1) as browsers and libnice write it.
final class ICECandidateTests: XCTestCase {
    func testBrowserAndLibniceCandidatesParseAndWriteBackUnchanged() throws {
        let lines = [
            "candidate:1 1 UDP 2015364095 127.0.0.1 44232 typ host",
            "candidate:842163049 1 udp 1677729535 203.0.113.7 40000 typ srflx raddr 192.168.1.2 rport 54400 generation 0 ufrag EsAw network-cost 999",
            "candidate:3 1 UDP 16777215 198.51.100.4 61000 typ relay raddr 203.0.113.7 rport 40000",
            "candidate:4 1 TCP 1518280447 192.168.1.2 9 typ host tcptype active generation 0",
            "candidate:5 1 udp 2113937151 5b1c4f3e-6a1d-4c1f-9f0e-0123456789ab.local 54400 typ host generation 0",
            "candidate:6 1 UDP 2015363583 fd00::2 5000 typ host",
            "candidate:a+/Z 256 UDP 4294967295 10.0.0.1 65535 typ prflx",
        ]
        for line in lines {
            XCTAssertEqual(try ICECandidate.parse(line).value, line.replacingOccurrences(of: " udp ", with: " UDP "), line)
        }
        let srflx = try ICECandidate.parse(lines[1])
        XCTAssertEqual(srflx.kind, .serverReflexive)
        XCTAssertEqual(srflx.foundation, "842163049")
        XCTAssertEqual(srflx.priority, 1_677_729_535)
        XCTAssertEqual(srflx.relatedAddress, "192.168.1.2")
        XCTAssertEqual(srflx.relatedPort, 54400)
        XCTAssertEqual(srflx.extensions.map(\.name), ["generation", "ufrag", "network-cost"])
        XCTAssertTrue(srflx.hasIPAddress)
        XCTAssertFalse(try ICECandidate.parse(lines[4]).hasIPAddress)
        XCTAssertEqual(try ICECandidate.parse(lines[3]).transport, .tcp)
        XCTAssertEqual(try ICECandidate.parse(lines[2]).kind, .relayed)
    }

    func testOutOfGrammarCandidatesNameWhatIsWrong() {
        let cases: [(String, ICECandidate.ParseError)] = [
            ("candidate:" + String(repeating: "1", count: 33) + " 1 UDP 1 10.0.0.1 1 typ host", .malformedField("foundation")),
            ("candidate:1 0 UDP 1 10.0.0.1 1 typ host", .malformedField("component")),
            ("candidate:1 1000 UDP 1 10.0.0.1 1 typ host", .malformedField("component")),
            ("candidate:1 1 UDP 4294967296 10.0.0.1 1 typ host", .malformedField("priority")),
            ("candidate:1 1 UDP 1 10.0.0.1 1 typ host raddr", .malformedField("extension")),
            ("candidate:1 1 UDP 1 10.0.0.1 1 typ host x y raddr 10.0.0.2", .malformedField("extension")),
            ("candidate:1 1 UDP 1 10.0.0.1 1 typ srflx rport 99999", .malformedField("rport")),
            ("candidate:1 1 UDP 1 10.0.0.1 1 typ host ", .malformedField("extension")),
            ("candidate:1 1 U:P 1 10.0.0.1 1 typ host", .malformedField("transport")),
            ("candidate:1 1 UDP 1 host_name 1 typ host", .malformedField("address")),
            ("candidate 1 1 UDP 1 10.0.0.1 1 typ host", .notACandidate),
        ]
        for (line, expected) in cases {
            XCTAssertEqual(thrownError { () throws(ICECandidate.ParseError) in _ = try ICECandidate.parse(line) }, expected, line)
        }
    }
}
