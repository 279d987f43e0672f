import TetherNet

extension RelayServer {
    /// Peers allowed to scrape: loopback only, in each spelling a socket can report (§2.10).
    static let loopbackPeers: Set<String> = ["127.0.0.1", "::1", "::ffff:127.0.0.1"]

    /// §2.10: `/metrics` answers only a direct loopback scrape. Every proxy adds
    /// `X-Forwarded-For`, so the public path through one can never see the counters.
    func scrape(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        guard Self.isDirectLoopback(request) else { return reply(.text(403, "forbidden")) }
        let socketsLive = self.socketsLive
        occupancy { [metrics] occupancy in
            reply(.text(200, metrics.render(occupancy: occupancy, socketsLive: socketsLive), contentType: "text/plain; version=0.0.4"))
        }
    }

    /// Liveness for supervisors and deploy checks: `ok`, under the same loopback-only rule as
    /// `/metrics` (the reference has no `/healthz`; its dashboard's answers `ok\n`, §9.2).
    func health(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        reply(Self.isDirectLoopback(request) ? .text(200, "ok\n") : .text(403, "forbidden"))
    }

    /// The TCP peer is loopback and no proxy header says it forwarded someone else.
    static func isDirectLoopback(_ request: HTTPServerRequest) -> Bool {
        let headers = request.head.headers
        guard let peer = request.peer?.host, loopbackPeers.contains(peer) else { return false }
        return !headers.contains("X-Forwarded-For") && !headers.contains("CF-Connecting-IP")
    }
}
