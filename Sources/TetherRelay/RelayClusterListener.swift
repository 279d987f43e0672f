public import TetherNet

/// The cluster listener of a v1 cluster (`RELAY_CLUSTER_HOST`:`RELAY_CLUSTER_PORT`): sockets and
/// requests other nodes pass on, each carrying the cluster secret (compared in constant time;
/// anything else is 401 and closed) and the client key that node derived. Behind it is the
/// relay itself — the same gate, rooms and endpoints — keyed by that client, and never passing
/// anything on again. Keep it on the internal network: the secret authenticates nodes, but the
/// bytes are not encrypted unless a TLS terminator sits in front.
final class RelayClusterListener: HTTPServerDelegate {
    private unowned let relay: RelayServer

    init(relay: RelayServer) { self.relay = relay }

    static let unauthorized = HTTPResponse.text(401, "unauthorized")

    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        guard case let .node(clientIP)? = relay.nodeIngress(head) else { return Self.unauthorized }
        guard head.method == "POST", RoomEndpoints.routes.contains(String(head.path)) else { return .text(404, "not found") }
        return relay.screen(head, ingress: .node(clientIP: clientIP), ip: { clientIP })
    }

    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        // `screen` admitted only authenticated POSTs to a room endpoint.
        guard let ingress = relay.nodeIngress(request.head) else { return reply(Self.unauthorized) }
        relay.roomEndpoint(String(request.head.path), request, ingress: ingress, reply: reply)
    }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        guard let ingress = relay.nodeIngress(request.head) else { return .refuse(Self.unauthorized) }
        return relay.upgrade(request, handshake: handshake, ingress: ingress)
    }
}
