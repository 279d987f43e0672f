import Foundation
import TetherNet
import TetherRelay
import TetherStore
import TetherTestSupport
import XCTest

/// §2.11 against an in-process sink: the headers, the flat JSON body, the cadence, and failures
/// counted rather than logged.
final class MetricsPushTests: XCTestCase {
    private final class Sink: HTTPServerDelegate, @unchecked Sendable {
        let lock = NetLock()
        var requests: [HTTPServerRequest] = []
        let arrived = DispatchSemaphore(value: 0)
        func respond(to request: HTTPServerRequest) -> HTTPResponse {
            lock.withLock { requests.append(request) }
            arrived.signal()
            return .text(204, "")
        }
    }

    func testPushesAtStartThenEveryIntervalWithTheBearerTokenAndTheFlatBody() throws {
        let group = try EventLoopGroup(count: 2)
        defer { group.shutdown() }
        let sink = Sink()
        var sinkConfiguration = HTTPServer.Configuration()
        sinkConfiguration.port = 0
        let sinkServer = HTTPServer(group: group, configuration: sinkConfiguration, delegate: sink)
        let sinkPort = try sinkServer.start()
        defer { sinkServer.shutdown(grace: .seconds(1)) }

        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.metricsPushURL = "http://127.0.0.1:\(sinkPort)/ingest"
        configuration.metricsPushToken = "s3cret"
        configuration.metricsPushMs = 200
        let relay = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        let started = Date()
        try relay.start()
        defer { relay.shutdown() }
        XCTAssertEqual(sink.arrived.wait(timeout: .now() + 5), .success)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "the first push happens at start")
        XCTAssertEqual(sink.arrived.wait(timeout: .now() + 5), .success, "and again after the interval")

        let first = try XCTUnwrap(sink.lock.withLock { sink.requests.first })
        XCTAssertEqual(first.head.method, "POST")
        XCTAssertEqual(String(first.head.path), "/ingest")
        XCTAssertEqual(first.head.headers["Authorization"], "Bearer s3cret")
        XCTAssertEqual(first.head.headers["Content-Type"], "application/json")
        let body = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(first.body)) as? [String: Any])
        XCTAssertEqual(Set(body.keys), ["ts", "ws_upgrades_total", "ws_upgrades_rejected_total", "http_requests_total", "http_errors_total",
                                        "process_exceptions_total", "quota_exceeded_total", "rooms_live", "sockets_live"])
        XCTAssertEqual(body["rooms_live"] as? Int, 0)
        let ts = try XCTUnwrap(body["ts"] as? Double)
        XCTAssertEqual(ts / 1000, Date().timeIntervalSince1970, accuracy: 10)
    }

    func testAFailedPushIsCountedNotThrown() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.metricsPushURL = "http://127.0.0.1:1/ingest"   // nothing listens on port 1
        configuration.metricsPushToken = "t"
        configuration.metricsPushMs = 60_000
        let relay = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        try relay.start()
        defer { relay.shutdown() }
        var exposition = ""
        eventually("relay_metrics_push_errors_total 1 in \(exposition)", within: 5) {
            exposition = relay.metrics.render(occupancy: .init(), socketsLive: 0)
            return exposition.contains("relay_metrics_push_errors_total 1")
        }
    }
}
