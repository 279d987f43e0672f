import Foundation
@testable import TetherService
import XCTest

final class LogFormatTests: XCTestCase {
    /// 2026-12-01T23:36:19.123Z
    private let instant: Int64 = 1_796_168_179_123_456_789

    func testPlainIsTheLineAloneAsTheReferenceWritesIt() {
        XCTAssertEqual(String(decoding: LogFormat.plain.encode("relay: listening on 127.0.0.1:8787", level: .info, service: "relay", nowNanoseconds: instant), as: UTF8.self),
                       "relay: listening on 127.0.0.1:8787\n")
    }

    func testTimestampPutsTheUTCTimeToTheMillisecondAndTheLevelFirst() {
        XCTAssertEqual(String(decoding: LogFormat.timestamp.encode("relay: storage unavailable: x", level: .error, service: "relay", nowNanoseconds: instant), as: UTF8.self),
                       "2026-12-01T23:36:19.123Z error relay: storage unavailable: x\n")
        XCTAssertEqual(LogFormat.rfc3339(5_000_000), "1970-01-01T00:00:00.005Z")
        XCTAssertEqual(String(decoding: LogFormat.timestamp.encode("a\nb", level: .debug, service: "relay", nowNanoseconds: 0), as: UTF8.self),
                       "1970-01-01T00:00:00.000Z debug a b\n", "a line never forges another")
    }

    func testJSONIsOneObjectPerLineThatAnyParserReads() throws {
        let bytes = LogFormat.json.encode("relay \"q\" \\ tab\tnew\nline \u{1}", level: .warning, service: "relay", nowNanoseconds: instant)
        XCTAssertEqual(bytes.last, 0x0A)
        XCTAssertFalse(bytes.dropLast().contains(0x0A), "one line")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bytes.dropLast())) as? [String: String])
        XCTAssertEqual(object, ["ts": "2026-12-01T23:36:19.123Z", "level": "warning", "service": "relay", "msg": "relay \"q\" \\ tab\tnew\nline \u{1}"])
    }

    /// The service is its own field, so the message drops the `relay: ` it starts with, and each
    /// `name=value` of the line is a field a log pipeline can filter on.
    func testJSONLeavesTheServicePrefixOutOfTheMessageAndLiftsNameValueWordsIntoFields() throws {
        let line = "relay room#ab12 disconnect role=mac code=1006 lived=1520ms (db=relay.db, tls=off)"
        let bytes = LogFormat.json.encode("relay: listening on 127.0.0.1:8787 (db=relay.db, attest=required, tls=off, admin=9787) tether 0.5.0",
                                          level: .info, service: "relay", nowNanoseconds: instant)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bytes.dropLast())) as? [String: String])
        XCTAssertEqual(object["msg"], "listening on 127.0.0.1:8787 (db=relay.db, attest=required, tls=off, admin=9787) tether 0.5.0")
        XCTAssertEqual(object["db"], "relay.db")
        XCTAssertEqual(object["attest"], "required")
        XCTAssertEqual(object["admin"], "9787")
        XCTAssertEqual(LogFormat.fields(of: line).map { "\($0)=\($1)" }, ["role=mac", "code=1006", "lived=1520ms", "db=relay.db", "tls=off"])
        XCTAssertTrue(LogFormat.fields(of: "msg=forged level=error ts=1 service=x").isEmpty, "the reserved names stay in the message")
    }

    func testLevelsOrderFromDebugToError() {
        XCTAssertEqual(LogLevel.allCases.sorted(), [.debug, .info, .warning, .error])
        XCTAssertTrue(LogLevel.warning >= .info)
    }

    func testTheSinkWritesInItsFormatAndDiagnosticsAreDebug() {
        let output = RecordingOutput()
        let sink = LogSink(name: "push", verbose: true, format: .json, output: output.write)
        sink.log("push: listening", level: .info)
        sink.diagnostic("push: detail")
        sink.flush()
        let levels = output.all.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]).flatMap { $0?["level"] }
        }
        XCTAssertEqual(levels, ["info", "debug"])
        sink.close()
    }

    func testTheSettingTakesExactlyTheThreeNames() throws {
        XCTAssertEqual(try SettingParser<LogFormat>.logFormat.parse("json"), .json)
        XCTAssertThrowsError(try SettingParser<LogFormat>.logFormat.parse("JSON"))
        XCTAssertThrowsError(try SettingParser<LogFormat>.logFormat.parse("text"))
    }
}
