import Foundation
import TetherNet
import TetherService
import TetherSync
import XCTest

/// A small service built from the chassis alone, the way a push relay or signaling server is:
/// a settings table, a public server (router, gate, metrics), the admin listener and a log.
private enum EchoSettings {
    static let maxSockets = Setting<Int64>("ECHO_MAX_SOCKETS_PER_IP", default: 64, parser: .countOrDefault(64), help: "sockets per IP")
    static let upgradeRate = Setting<Int64>("ECHO_WS_RATE_LIMIT", default: 120, parser: .zeroOrPositive, help: "upgrades per IP per minute (0 = off)")
    static let pingRate = Setting<Int64>("ECHO_PING_RATE_LIMIT", default: 10, parser: .zeroOrPositive, help: "pings per IP per minute (0 = off)")
    static let table = SettingsTable(command: "tether echo", rows: [maxSockets, upgradeRate, pingRate])
}

private final class EchoService: HTTPServerDelegate {
    let gate: ConnectionGate
    let router: Router
    let rejected: MetricFamily<Counter>
    let log: LogSink

    init(_ values: SettingValues, metrics: MetricsRegistry, log: LogSink, clock: any NetClock) throws {
        var limits = ConnectionGate.Limits()
        limits.maxSocketsPerIP = Int(try values.value(of: EchoSettings.maxSockets))
        limits.socketRate = .init(limit: Int(try values.value(of: EchoSettings.upgradeRate)))
        limits.socketRateRefusal = .text(429, "echo: slow down")
        limits.requestLimits["ping"] = .init(.init(limit: Int(try values.value(of: EchoSettings.pingRate))))
        gate = ConnectionGate(limits: limits, clock: clock)
        rejected = metrics.counter("echo_rejected_total", help: "Refusals by reason.", labels: ["reason"], hiddenAtZero: true)
        metrics.gauge("echo_sockets_live", help: "Open sockets.") { [gate] in Int64(gate.openSockets) }
        var router = Router()
        router.add("GET", "/ping") { _ in .text(200, "pong") }
        self.router = router
        self.log = log
    }

    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        guard head.path == "/ping", let refusal = gate.admitRequest("ping", ip: gate.clientIP(head, peer: peer)) else { return nil }
        rejected.labels(refusal.reason).increment()
        return refusal.response
    }

    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) { router.route(request, reply: reply) }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        switch gate.admitSocket(ip: gate.clientIP(request.head, peer: request.peer)) {
        case let .failure(refusal):
            rejected.labels(refusal.reason).increment()
            return .refuse(refusal.response)
        case let .success(lease):
            log.log("echo: connect #\(lease.arrival)")
            // This echo hangs up at once; a real service releases when its socket closes.
            return .accept { transport, _ in
                transport.closeAfterFlush()
                lease.release()
            }
        }
    }
}

final class ChassisServiceTests: XCTestCase {
    func testAServiceBuiltFromTheChassisAloneGatesRoutesCountsAndReports() throws {
        let values = try EchoSettings.table.load(arguments: ["--echo-ws-rate-limit", "2"], environment: ["ECHO_PING_RATE_LIMIT": "1"]) { _ in nil }
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let metrics = MetricsRegistry()
        let lines = LogCollector()
        let log = LogSink(name: "echo", output: lines.write)
        defer { log.close() }
        metrics.counter("echo_log_lines_dropped_total", help: "Log lines dropped.") { UInt64(log.droppedLines) }
        let service = try EchoService(values, metrics: metrics, log: log, clock: ManualClock())
        let server = HTTPServer(group: group, configuration: HTTPServer.Configuration(), delegate: service)
        let port = try server.start()
        defer { server.shutdown(grace: .seconds(1)) }
        let admin = AdminListener(group: group, metrics: .registry(metrics))
        let adminPort = try admin.start()
        defer { admin.shutdown() }

        XCTAssertEqual(try LoopbackHTTP.get("/ping", port: port).body, "pong")
        XCTAssertEqual(try LoopbackHTTP.get("/ping", port: port).status, 429, "ECHO_PING_RATE_LIMIT=1")
        XCTAssertEqual(try LoopbackHTTP.get("/ping", method: "POST", port: port).status, 429, "the limiter counts before routing")

        let upgrade = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        XCTAssertEqual(try LoopbackHTTP.send(upgrade, port: port).status, 101)
        XCTAssertEqual(try LoopbackHTTP.send(upgrade, port: port).status, 101)
        let refused = try LoopbackHTTP.send(upgrade, port: port)
        XCTAssertEqual(refused.status, 429, "--echo-ws-rate-limit 2")
        XCTAssertEqual(refused.body, "echo: slow down")

        let scrape = try LoopbackHTTP.get("/metrics", port: adminPort).body
        XCTAssertTrue(scrape.contains("echo_rejected_total{reason=\"ping\"} 2\n"), scrape)
        XCTAssertTrue(scrape.contains("echo_rejected_total{reason=\"rate_limited\"} 1\n"), scrape)
        XCTAssertTrue(scrape.contains("echo_sockets_live 0\n"), scrape)
        XCTAssertTrue(scrape.contains("echo_log_lines_dropped_total 0\n"), scrape)
        log.flush()
        XCTAssertEqual(lines.all, ["echo: connect #1\n", "echo: connect #2\n"])
        XCTAssertTrue(EchoSettings.table.helpText.contains("--echo-ping-rate-limit  (ECHO_PING_RATE_LIMIT, default 10)"))
    }

    func testLoadReadsTheConfigFileFromDisk() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("echo-\(UUID().uuidString).env")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("ECHO_PING_RATE_LIMIT=7\n".utf8).write(to: file)
        let values = try EchoSettings.table.load(arguments: ["--config", file.path])
        XCTAssertEqual(try values.value(of: EchoSettings.pingRate), 7)
    }
}

private final class LogCollector: Sendable {
    private let lines = Locked<[String]>([])
    /// One output call may carry several whole lines (the sink batches them): kept a line each.
    var write: @Sendable ([UInt8]) -> Void {
        { [self] bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            lines.withLock { $0 += text.split(separator: "\n").map { $0 + "\n" } }
        }
    }
    var all: [String] { lines.withLock { $0 } }
}
