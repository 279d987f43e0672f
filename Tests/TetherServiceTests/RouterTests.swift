import TetherNet
import TetherService
import XCTest

final class RouterTests: XCTestCase {
    private func router() -> Router {
        var router = Router()
        router.add("POST", "/register") { _ in .text(200, "ok") }
        router.add("GET", "/shardmap.json") { _ in .text(200, "{}") }
        router.add(Router.anyMethod, "/metrics") { _ in .text(200, "") }
        return router
    }

    private func kind(_ match: Router.Match) -> String {
        switch match {
        case .handler: "handler"
        case let .methodNotAllowed(allowed): "405 " + allowed.joined(separator: ",")
        case .notFound: "404"
        }
    }

    func testPathsMatchExactlyWithoutTheQuery() {
        let router = router()
        XCTAssertEqual(kind(router.match(method: "POST", path: "/register")), "handler")
        XCTAssertEqual(kind(router.match(method: "POST", path: "/register/")), "404", "no trailing-slash folding")
        XCTAssertEqual(kind(router.match(method: "POST", path: "/REGISTER")), "404")
        XCTAssertTrue(router.hasRoute(path: "/register"))
        XCTAssertFalse(router.hasRoute(path: "/attest"))
    }

    func testAGetRouteAnswersHeadAndAnyMethodAnswersEverything() {
        let router = router()
        XCTAssertEqual(kind(router.match(method: "HEAD", path: "/shardmap.json")), "handler")
        XCTAssertEqual(kind(router.match(method: "PATCH", path: "/metrics")), "handler")
    }

    func testAnotherMethodOnAKnownPathListsTheAllowedOnes() {
        let router = router()
        XCTAssertEqual(kind(router.match(method: "GET", path: "/register")), "405 POST")
        XCTAssertEqual(kind(router.match(method: "POST", path: "/shardmap.json")), "405 GET,HEAD")
    }

    /// The relay's public routes, as relay.md §2.2 step 8 answers them: a wrong method and an
    /// unknown path both get the service's own 501.
    func testAServiceChoosesItsOwnMismatchAndFallbackAnswers() throws {
        let notImplemented: @Sendable (HTTPServerRequest) -> HTTPResponse = { _ in .text(501, "not implemented", contentType: "text/plain;charset=UTF-8") }
        var router = Router(methodMismatch: .respond { request, _ in notImplemented(request) }, fallback: notImplemented)
        router.add("POST", "/register") { _ in .text(200, "registered") }
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let listener = AdminListener(group: group, metrics: .registry(MetricsRegistry()), routes: router)
        let port = try listener.start()
        defer { listener.shutdown() }
        XCTAssertEqual(try LoopbackHTTP.get("/register", method: "POST", port: port).body, "registered")
        for (method, path) in [("GET", "/register"), ("POST", "/nope")] {
            let reply = try LoopbackHTTP.get(path, method: method, port: port)
            XCTAssertEqual(reply.status, 501, "\(method) \(path)")
            XCTAssertEqual(reply.headers["content-type"], "text/plain;charset=UTF-8")
            XCTAssertEqual(reply.body, "not implemented")
            XCTAssertNil(reply.headers["allow"])
        }
    }
}
