public import TetherNet
import TetherService

extension SignalServer {
    static let path = "/signal"

    /// §4 and §13.1: everything but an upgrade on `/signal` is refused with a plain-text body.
    public func respond(to request: HTTPServerRequest) -> HTTPResponse {
        if let refusal = Self.refusePathOrQuery(request.head) { return refusal }
        return .text(426, "upgrade required")
    }

    static func refusePathOrQuery(_ head: HTTPRequestHead) -> HTTPResponse? {
        guard head.path == path else { return .text(404, "not found") }
        // A `?` with an empty query counts.
        guard !head.target.contains("?") else { return .text(400, "query not allowed") }
        return nil
    }

    /// §13.1's order: path, query, `Origin`, total sockets, per-IP sockets, per-IP upgrade rate
    /// (which counts every request reaching it), then the RFC 6455 handshake itself.
    /// An address's connections still sending their heads are capped as its sockets are
    /// (`ConnectionGate.admitConnection`).
    public func admitConnection(peer: SocketAddress?) -> HTTPResponse? { gate.admitConnection(peer: peer)?.response }

    public func connectionLeft(peer: SocketAddress?) { gate.connectionLeft(peer: peer) }

    public func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        if let refusal = Self.refusePathOrQuery(request.head) { return refuse(refusal, reason: refusal.status == 404 ? "path" : "query") }
        let origins = request.head.headers.values("Origin")
        if !origins.isEmpty {
            // Browsers are refused unless listed; an empty or repeated Origin is refused too.
            guard origins.count == 1, !origins[0].isEmpty, configuration.allowedOrigins.contains(String(origins[0])) else {
                return refuse(.text(403, "forbidden"), reason: "origin")
            }
        }
        guard !runtime.isDraining else { return refuse(.text(503, "capacity"), reason: "draining") }
        let ip = gate.clientIP(request.head, peer: request.peer)
        let lease: SocketLease
        switch gate.admitSocket(ip: ip) {
        case let .failure(refusal): return refuse(refusal.response, reason: refusal.reason)
        case let .success(admitted): lease = admitted
        }
        guard case .upgrade = handshake else {
            lease.release()
            if case let .refuse(response) = handshake { return refuse(response, reason: "handshake") }
            return refuse(.text(400, "bad upgrade"), reason: "handshake")
        }
        return .accept { [self] transport, leftover in
            SignalSocket(server: self, lease: lease, transport: transport).start(transport, leftover: leftover)
        }
    }

    private func refuse(_ response: HTTPResponse, reason: String) -> WebSocketUpgradeDecision {
        metrics.upgradesRefused.labels(reason).increment()
        return .refuse(response)
    }
}
