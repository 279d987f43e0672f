import Synchronization
import TetherNet
import TetherService
import XCTest

final class AdminListenerTests: XCTestCase {
    private var group: EventLoopGroup!
    private var listener: AdminListener!
    private var port: UInt16 = 0
    private let registry = MetricsRegistry()
    private let readiness = ReadinessChecks()

    override func setUpWithError() throws {
        group = try EventLoopGroup(count: 1)
        registry.counter("svc_requests_total", help: "Requests.").increment(by: 2)
        var routes = Router()
        routes.add("POST", "/reload") { _ in .text(200, "reloaded\n") }
        listener = AdminListener(group: group, metrics: .registry(registry), readiness: readiness, routes: routes)
        port = try listener.start()
    }

    override func tearDown() {
        listener.shutdown()
        group.shutdown()
    }

    func testMetricsAreTheRegistrysExpositionAsPrometheusText() throws {
        let reply = try LoopbackHTTP.get("/metrics?x=1", port: port)
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.headers["content-type"], "text/plain; version=0.0.4")
        XCTAssertEqual(reply.body, registry.render())
        XCTAssertTrue(reply.body.contains("svc_requests_total 2\n"))
    }

    func testHealthzIsLivenessAndAnswersOk() throws {
        let reply = try LoopbackHTTP.get("/healthz", port: port)
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.body, "ok\n")
        let head = try LoopbackHTTP.get("/healthz", method: "HEAD", port: port)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-length"], "3")
        XCTAssertEqual(head.body, "", "HEAD has no body")
    }

    func testReadyzNamesEveryFailingCheck() throws {
        XCTAssertEqual(try LoopbackHTTP.get("/readyz", port: port).body, "ready\n", "no checks: ready")
        let storage = Atomic(true)
        readiness.register("storage") { storage.load(ordering: .relaxed) }
        readiness.register("shard map") { false }
        readiness.register("draining") { false }
        var reply = try LoopbackHTTP.get("/readyz", port: port)
        XCTAssertEqual(reply.status, 503)
        XCTAssertEqual(reply.body, "not ready: shard map, draining\n")
        storage.store(false, ordering: .relaxed)
        reply = try LoopbackHTTP.get("/readyz", port: port)
        XCTAssertEqual(reply.body, "not ready: storage, shard map, draining\n")
    }

    func testAServiceRouteIsServedAndUnknownPathsAndMethodsAreRefused() throws {
        XCTAssertEqual(try LoopbackHTTP.get("/reload", method: "POST", port: port).body, "reloaded\n")
        let unknown = try LoopbackHTTP.get("/nope", port: port)
        XCTAssertEqual(unknown.status, 404)
        let wrong = try LoopbackHTTP.get("/metrics", method: "DELETE", port: port)
        XCTAssertEqual(wrong.status, 405)
        XCTAssertEqual(wrong.headers["allow"], "GET, HEAD")
    }

    func testAProxiedRequestIsForbidden() throws {
        for header in ["X-Forwarded-For: 1.2.3.4", "CF-Connecting-IP: 1.2.3.4", "X-Real-IP: 1.2.3.4", "Forwarded: for=1.2.3.4",
                       "True-Client-IP: 1.2.3.4", "X-Client-IP: 1.2.3.4"] {
            let reply = try LoopbackHTTP.get("/metrics", port: port, headers: [header])
            XCTAssertEqual(reply.status, 403, header)
            XCTAssertEqual(reply.body, "forbidden")
        }
    }

    func testAPeerThatIsNotExactlyLoopbackIsForbidden() throws {
        let reply = try LoopbackHTTP.get("/healthz", port: port, from: "127.0.0.5")
        XCTAssertEqual(reply.status, 403)
    }

    func testAServiceRendererMayAnswerLaterFromAnotherThread() throws {
        let lateGroup = try EventLoopGroup(count: 1)
        defer { lateGroup.shutdown() }
        let elsewhere = lateGroup.loops[0]
        let late = AdminListener(group: group, metrics: MetricsSource { done in
            elsewhere.execute { done("late_total 1\n") }
        })
        let port = try late.start()
        defer { late.shutdown() }
        XCTAssertEqual(try LoopbackHTTP.get("/metrics", port: port).body, "late_total 1\n")
    }
}
