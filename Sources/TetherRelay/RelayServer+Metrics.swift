import TetherNet
import TetherService

extension RelayServer {
    /// §2.10: `/metrics` on the public port answers only a direct loopback scrape (any method):
    /// every proxy adds a forwarding header, so the public path through one never sees the counters.
    func scrape(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        guard LoopbackAccess.isDirectLoopback(request.head, peer: request.peer) else { return reply(.text(403, "forbidden")) }
        renderMetrics { reply(.text(200, $0, contentType: Prometheus.contentType)) }
    }

    /// The exposition with this scrape's occupancy, summed over every loop first (for both the
    /// public `/metrics` and the admin listener's).
    func renderMetrics(_ done: @escaping @Sendable (String) -> Void) {
        let socketsLive = self.socketsLive
        occupancy { [metrics] occupancy in done(metrics.render(occupancy: occupancy, socketsLive: socketsLive)) }
    }

    /// Liveness for supervisors and deploy checks: `ok`, under the same loopback-only rule as
    /// `/metrics` (the reference has no `/healthz`; its dashboard's answers `ok\n`, §9.2).
    func health(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        reply(LoopbackAccess.isDirectLoopback(request.head, peer: request.peer) ? .text(200, "ok\n") : .text(403, "forbidden"))
    }

    /// Tether's own series, after the reference's (which a dashboard reads unchanged): how far
    /// storage has fallen behind, listener back-offs, log lines lost to a stalled stderr.
    func registerChassisMetrics() {
        let registry = metrics.registry
        registry.registerBuildInfo(service: "relay")
        registry.registerProcessMetrics()
        registry.gauge("relay_store_backlog", help: "Storage calls queued and not yet finished.") { [storage] in Int64(storage.backlog) }
        registry.counter("relay_accept_backoffs_total", help: "Times the listener paused accepting because descriptors ran out.") { [weak self] in
            UInt64(self?.runtime.listeners?.http.acceptBackOffs.value ?? 0)
        }
        registry.counter("relay_log_lines_dropped_total", help: "Log lines dropped because standard error did not keep up.") { [weak self] in
            UInt64(self?.runtime.droppedLogLines ?? 0)
        }
    }
}
