import TetherCrypto
public import TetherNet
import TetherWire

/// How a request reached this node.
public enum Ingress: Sendable, Equatable {
    /// From a client (or the proxy in front): keyed as the gate derives it.
    case client
    /// Passed on by another node of a v1 cluster, with the client key that node derived.
    case node(clientIP: String)
}

/// Where a room-scoped request or upgrade goes (`RelayServer.route`).
enum RoomRoute {
    case serve
    case forward(owner: String)
    case refuse(HTTPResponse)

    var refusal: HTTPResponse? {
        if case let .refuse(response) = self { return response }
        return nil
    }
}

/// A v1 cluster (`RELAY_NODE_URL`): any node serves any room. A node that receives a socket or
/// request for a room whose bucket another live node owns passes it, untouched, to that node's
/// cluster listener over a connection of its own — the head with two fields added (the shared
/// secret, and the client key it derived, so limits apply to the client and not to the node),
/// then every byte each way. The owner answers as if the client had come to it directly: the
/// 101 or refusal, every frame and close are its own, and the relay's wire behaviour is
/// unchanged for clients. So a plain round-robin proxy works, and a restart strands no parked
/// Mac: its socket lands on any node, which passes it to whichever node owns the room now.
extension RelayServer {
    /// The secret a node presents; compared in constant time, never logged.
    static let clusterSecretField = "x-tether-cluster-secret"
    /// The client key (relay.md §2.4) as the passing node derived it.
    static let clusterClientField = "x-tether-client"
    /// A client key is an address's text: anything longer is not one.
    static let clientKeyLimit = 64

    /// Connecting to the owner: on a private network a live node answers at once; one that
    /// stopped answering has a lapsed lease within the TTL, and the client retries meanwhile.
    static let forwardConnectTimeout: Duration = .seconds(2)
    /// A passed request's whole exchange: the owner's own storage calls are bounded at 2 s each
    /// (`PostgresPool.Settings.callTimeoutMs`), and an endpoint makes at most two.
    static let forwardRequestTimeout: Duration = .seconds(5)

    /// Hop-by-hop fields (RFC 9110 §7.6.1) and the ones `HTTPClient` writes itself: never passed.
    static let hopByHop: Set<String> = ["connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
                                        "proxy-connection", "content-length", "host"]

    /// The client key of a request on the cluster listener, or nil when it does not carry
    /// exactly one secret equal to this cluster's and exactly one plausible client key.
    func nodeIngress(_ head: HTTPRequestHead) -> Ingress? {
        guard let cluster = configuration.cluster else { return nil }
        let secrets = head.headers.values(Self.clusterSecretField), keys = head.headers.values(Self.clusterClientField)
        guard secrets.count == 1, constantTimeEquals(Array(secrets[0].utf8), cluster.secret),
              keys.count == 1, !keys[0].isEmpty, keys[0].utf8.count <= Self.clientKeyLimit else { return nil }
        return .node(clientIP: keys[0])
    }

    /// `head` as the owner receives it: the client's own copies of the cluster fields removed
    /// (a client cannot pose as a node, nor name its own key), this node's added.
    func passedHead(_ head: HTTPRequestHead, clientIP: String, keepingHopByHop: Bool) -> HTTPRequestHead {
        var passed = head
        passed.headers.remove(Self.clusterSecretField)
        passed.headers.remove(Self.clusterClientField)
        if !keepingHopByHop { for name in Self.hopByHop { passed.headers.remove(name) } }
        passed.headers.add(Self.clusterSecretField, String(decoding: configuration.cluster?.secret ?? [], as: UTF8.self))
        passed.headers.add(Self.clusterClientField, clientIP)
        return passed
    }

    /// Binds the cluster listener of a v1 cluster (`RELAY_CLUSTER_HOST`:`RELAY_CLUSTER_PORT`).
    func startClusterListener() throws {
        guard let cluster = configuration.cluster else { return }
        var settings = HTTPServer.Configuration()
        settings.host = cluster.host
        settings.port = cluster.port
        let server = HTTPServer(group: group, configuration: settings, delegate: RelayClusterListener(relay: self))
        let port = try server.start()
        clusterServer.withLock { $0 = server }
        write("relay: cluster listener on \(cluster.host):\(port) as node \(sharding.host); v1 rooms owned by other nodes are passed to them")
    }

    /// `host:port`, `[v6]:port` → the parts `TCPConnector` takes.
    static func nodeAddress(_ owner: String) -> (host: String, port: UInt16)? {
        guard let colon = owner.lastIndex(of: ":"), let port = UInt16(owner[owner.index(after: colon)...]) else { return nil }
        var host = String(owner[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }

    /// Passes an upgrade's connection (head unanswered, `leftover` read past it) to `owner` and
    /// pipes it there; its place under this node's caps (taken by the caller) is given back when
    /// both sides have closed. Runs on the connection's loop.
    func forwardSocket(_ transport: any Transport, head: HTTPRequestHead, leftover: [UInt8], clientIP: String, owner: String) {
        transport.pauseReading()
        let attempt = ForwardAttempt(relay: self, client: transport, clientIP: clientIP)
        guard let address = Self.nodeAddress(owner) else { return attempt.unreachable() }
        let bytes = passedHead(head, clientIP: clientIP, keepingHopByHop: true).serialized() + leftover
        let confined = UncheckedTransfer(attempt)
        TCPConnector.connect(host: address.host, port: address.port, on: transport.loop, timeout: Self.forwardConnectTimeout) { result in
            switch result {
            case let .success(upstream): confined.value.connected(upstream, sending: bytes)
            case .failure: confined.value.unreachable()
            }
        }
    }

    /// Passes a complete request to `owner` and relays its answer; 503 `owner unavailable` when
    /// the owner cannot be reached or does not answer in time. Runs on the request's loop.
    func forwardRequest(_ request: HTTPServerRequest, clientIP: String, owner: String, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        let head = passedHead(request.head, clientIP: clientIP, keepingHopByHop: false)
        HTTPClient.request(head.method, "http://\(owner)\(head.target)", headers: head.headers, body: request.body,
                           on: group.loops[request.loopIndex], timeout: Self.forwardRequestTimeout,
                           maxResponseBody: Self.forwardedResponseLimit) { [self] result in
            guard case let .success(answer) = result else {
                metrics.forward(.requestUnreachable)
                return reply(Self.ownerUnavailableResponse)
            }
            metrics.forward(.request)
            var headers = HTTPHeaders()
            for field in answer.headers where !Self.hopByHop.contains(field.name.lowercased()) { headers.add(field.name, field.value) }
            reply(HTTPResponse(status: answer.status, headers: headers, body: answer.body))
        }
    }

    /// The relay's answers are a few hundred bytes of JSON; this bounds what a confused owner
    /// (or anything else on its port) can make this node hold per request.
    static let forwardedResponseLimit = 64 * 1024
}

/// The open pipes of one loop, closed when the node shuts down.
final class ForwardedPipes: Sendable {
    private let members: LoopBound<[ObjectIdentifier: TransportPipe]>

    init(loop: EventLoop) { members = LoopBound([:], loop: loop) }

    func insert(_ pipe: TransportPipe) { members.value[ObjectIdentifier(pipe)] = pipe }
    func remove(_ pipe: TransportPipe) { members.value[ObjectIdentifier(pipe)] = nil }

    /// A closing pipe leaves the set as it finishes, so the set is copied first.
    func closeAll() { for pipe in Array(members.value.values) { pipe.close() } }
}

/// One socket on its way to its room's owner (confined to the client's loop).
final class ForwardAttempt {
    private let relay: RelayServer
    private let client: any Transport
    private let clientIP: String

    init(relay: RelayServer, client: any Transport, clientIP: String) {
        self.relay = relay
        self.client = client
        self.clientIP = clientIP
    }

    /// The owner could not be reached: the client hears 503 `owner unavailable` and retries.
    func unreachable() {
        relay.metrics.forward(.socketUnreachable)
        relay.release(clientIP)
        guard !client.isClosed else { return }
        client.write(RelayServer.ownerUnavailableResponse.serialized(closing: true))
        client.closeAfterFlush()
    }

    func connected(_ upstream: TCPConnection, sending bytes: [UInt8]) {
        relay.metrics.forward(.socket)
        upstream.write(bytes)
        let pipes = relay.forwardedPipes[client.loop.index]
        let (relay, clientIP) = (relay, clientIP)
        let pipe = TransportPipe(client, upstream) { pipe in
            pipes.remove(pipe)
            relay.release(clientIP)
        }
        if !pipe.isFinished { pipes.insert(pipe) }
    }
}
