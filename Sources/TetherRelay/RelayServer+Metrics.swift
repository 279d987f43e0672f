import TetherNet

extension RelayServer {
    /// Peers allowed to scrape: loopback only, in each spelling a socket can report (§2.10).
    static let loopbackPeers: Set<String> = ["127.0.0.1", "::1", "::ffff:127.0.0.1"]

    /// §2.10: `/metrics` answers only a direct loopback scrape. Every proxy adds
    /// `X-Forwarded-For`, so the public path through one can never see the counters.
    func scrape(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        let headers = request.head.headers
        guard let peer = request.peer?.host, Self.loopbackPeers.contains(peer),
              !headers.contains("X-Forwarded-For"), !headers.contains("CF-Connecting-IP") else {
            return reply(.text(403, "forbidden"))
        }
        let socketsLive = self.socketsLive
        occupancy { [metrics] occupancy in
            reply(.text(200, metrics.render(occupancy: occupancy, socketsLive: socketsLive), contentType: "text/plain; version=0.0.4"))
        }
    }
}
