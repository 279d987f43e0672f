import TetherCrypto
public import TetherNet

/// The cluster listener (`SIGNAL_CLUSTER_HOST`:`SIGNAL_CLUSTER_PORT`): other nodes' connections
/// at `/cluster`, each presenting `Authorization: Bearer <SIGNAL_CLUSTER_SECRET>` (compared in
/// constant time; anything else is 401 and closed). Keep it on the internal network: the secret
/// authenticates nodes, but the frames are not encrypted unless a TLS terminator sits in front.
final class ClusterListener: HTTPServerDelegate {
    private unowned let cluster: SignalCluster

    init(cluster: SignalCluster) { self.cluster = cluster }

    func respond(to request: HTTPServerRequest) -> HTTPResponse { .text(request.head.path == "/cluster" ? 426 : 404, "not found") }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        guard request.head.path == "/cluster" else { return .refuse(.text(404, "not found")) }
        let expected = Array("Bearer ".utf8) + cluster.secret
        guard let presented = request.head.headers.only("Authorization"), constantTimeEquals(Array(presented.utf8), expected) else {
            return .refuse(.text(401, "unauthorized"))
        }
        guard case .upgrade = handshake else {
            if case let .refuse(response) = handshake { return .refuse(response) }
            return .refuse(.text(400, "bad upgrade"))
        }
        return .accept { [cluster] transport, leftover in
            let peer = ClusterPeer(cluster: cluster, loop: transport.loop)
            peer.connection = WebSocketConnection(connection: transport, role: .server, delegate: peer, leftover: leftover)
        }
    }
}

/// One inbound cluster connection; confined to its loop.
final class ClusterPeer: WebSocketDelegate, Sendable {
    private unowned let cluster: SignalCluster
    private let held: LoopBound<WebSocketConnection?>

    init(cluster: SignalCluster, loop: EventLoop) {
        self.cluster = cluster
        held = LoopBound(nil, loop: loop)
    }

    /// The inbound connection, on its loop.
    var connection: WebSocketConnection? {
        get { held.value }
        set { held.value = newValue }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        guard let message = ClusterMessage.parse(text) else { return socket.close(code: WebSocketCloseCode.policyViolation, reason: "bad message") }
        let loop = socket.connection.loop
        cluster.received(message) { [self] reply in
            loop.execute { [self] in connection?.send(text: Array(reply.json.utf8)) }
        }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        socket.close(code: WebSocketCloseCode.policyViolation, reason: "bad message")
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) { connection = nil }
}
