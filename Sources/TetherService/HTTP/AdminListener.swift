public import TetherNet

/// The operator listener every service runs beside its public one (ARCHITECTURE.md): loopback by
/// default, serving `/metrics` (Prometheus), `/healthz` (liveness: `ok`), `/readyz` (200
/// `ready`, or 503 naming the failing checks) and the live status page `/status`, plus any
/// routes the service adds.
///
/// Liveness is the process answering at all; readiness is whether it should be sent traffic (a
/// supervisor restarts on the first, a load balancer drains on the second).
public final class AdminListener: Sendable {
    /// Where the admin listener binds and whom it answers.
    public struct Configuration: Sendable {
        /// Loopback: the counters are for this host's scraper and dashboard, not the internet.
        public var host = "127.0.0.1"
        /// 0 picks a free port (tests); a service makes this one of its settings.
        public var port: UInt16 = 0
        /// Refuse (403 `forbidden`) anything but a direct loopback request (§2.10), even if the
        /// listener is bound wider. Turn off only to scrape from another host on a private network.
        public var onlyDirectLoopback = true

        /// Loopback, a free port, direct loopback requests only.
        public init() {}
    }

    private let server: HTTPServer

    /// An admin listener, not yet started.
    ///
    /// - Parameters:
    ///   - group: the loops to serve on; one loop is plenty for a scraper and a health check.
    ///   - configuration: where to bind, and whether to answer only direct loopback requests.
    ///   - metrics: what `/metrics` renders.
    ///   - readiness: what `/readyz` asks.
    ///   - routes: further operator routes, and the fallback for unknown paths (404 by default).
    ///   - status: the service's status page (`/status`); none when nil.
    public init(group: EventLoopGroup, configuration: Configuration = Configuration(), metrics: MetricsSource,
                readiness: ReadinessChecks = ReadinessChecks(), routes: Router = Router(), status: StatusPage? = nil) {
        var router = routes
        if let status {
            let page = Array(status.html.utf8)
            router.add("GET", "/status") { _ in
                HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")]), body: page)
            }
        }
        router.add("GET", "/metrics") { _, reply in
            metrics.render { reply(.text(200, $0, contentType: Prometheus.contentType)) }
        }
        router.add("GET", "/healthz") { _ in .text(200, "ok\n") }
        router.add("GET", "/readyz") { _ in
            let failing = readiness.failing()
            return failing.isEmpty ? .text(200, "ready\n") : .text(503, "not ready: \(failing.joined(separator: ", "))\n")
        }
        var http = HTTPServer.Configuration()
        http.host = configuration.host
        http.port = configuration.port
        server = HTTPServer(group: group, configuration: http,
                            delegate: AdminResponder(router: router, onlyDirectLoopback: configuration.onlyDirectLoopback))
    }

    /// Binds and starts serving; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 { try server.start() }

    /// The bound port (0 before `start`).
    public var port: UInt16 { server.port }

    /// Stops accepting and closes the listener's connections (a scrape in progress is answered).
    public func shutdown() { server.shutdown(grace: .seconds(1)) }
}

/// The admin listener's HTTP delegate: the access rule on the head, then the router.
final class AdminResponder: HTTPServerDelegate {
    let router: Router
    let onlyDirectLoopback: Bool

    init(router: Router, onlyDirectLoopback: Bool) {
        self.router = router
        self.onlyDirectLoopback = onlyDirectLoopback
    }

    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        guard onlyDirectLoopback, !LoopbackAccess.isDirectLoopback(head, peer: peer) else { return nil }
        return .text(403, "forbidden")
    }

    /// Operator requests carry no body worth more than this.
    func bodyLimit(for head: HTTPRequestHead) -> Int { 4_096 }

    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) { router.route(request, reply: reply) }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        .refuse(.text(404, "not found"))
    }
}
