public import TetherNet
import TetherService
import TetherWire

extension RelayServer {
    /// An address's connections still sending their heads are capped at `RELAY_MAX_SOCKETS_PER_IP`
    /// too (`ConnectionGate.admitConnection`); past it, a connection is answered 429 at accept:
    /// `too many connections` (an `ip_cap` rejection), or `rate limited` once the address's
    /// upgrades of the window, these refusals included, are spent (§2.3 step 2).
    public func admitConnection(peer: SocketAddress?) -> HTTPResponse? {
        guard let refusal = gate.admitConnection(peer: peer) else { return nil }
        metrics.upgradeRejected(RelayMetrics.Rejection(rawValue: refusal.reason) ?? .ip_cap)
        return refusal.response
    }

    public func connectionLeft(peer: SocketAddress?) { gate.connectionLeft(peer: peer) }

    /// §2.3 in order: the room gate (Origin, room header, owner), then the connection gate (the
    /// per-IP upgrade rate, the per-IP and total socket caps, and — under the same lock — the
    /// resident-room cap), then the handshake itself. An accepted socket moves to its room's loop,
    /// TLS included (the session travels with its connection).
    public func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        upgrade(request, handshake: handshake, ingress: .client)
    }

    /// The same for a client's upgrade or one another node passed on (whose client key it names).
    /// A socket for a room another node owns takes its place under this node's caps too — it
    /// holds two descriptors here while it lasts — and is passed on unanswered.
    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision, ingress: Ingress) -> WebSocketUpgradeDecision {
        let room: RoomName
        let ip: String
        switch ingress {
        case .client: ip = gate.clientIP(request.head, peer: request.peer)
        case let .node(clientIP): ip = clientIP
        }
        switch admitRoom(request.head, ingress: ingress) {
        case let .failure(refusal):
            let misdirected = refusal.response.status == 421 || refusal.response.body == Array(Self.ownerUnavailable.utf8)
            metrics.upgradeRejected(misdirected ? .misdirected : .gate)
            if !misdirected { metrics.gateRefused(status: refusal.response.status) }
            return .refuse(refusal.response)
        case let .success(.forward(_, owner)):
            if case let .failure(refusal) = gate.admitSocketPlace(ip: ip) {
                metrics.upgradeRejected(RelayMetrics.Rejection(rawValue: refusal.reason) ?? .gate)
                return .refuse(refusal.response)
            }
            let head = request.head
            return .handOver { [self] transport, leftover in
                forwardSocket(transport, head: head, leftover: leftover, clientIP: ip, owner: owner)
            }
        case let .success(.serve(admitted)): room = admitted
        }
        let arrival: UInt64
        switch gate.admitSocketPlace(ip: ip, check: { hasRoomFor(room) ? nil : Self.roomCapRefusal }) {
        case let .failure(refusal):
            metrics.upgradeRejected(RelayMetrics.Rejection(rawValue: refusal.reason) ?? .gate)
            return .refuse(refusal.response)
        case let .success(number): arrival = number
        }
        guard case .upgrade = handshake else {
            release(ip)
            if case let .refuse(response) = handshake { return .refuse(response) }
            return .refuse(.text(400, "bad upgrade"))
        }
        metrics.upgradeAccepted()
        let index = room.bucket % group.loops.count
        let target = group.loops[index]
        let table = rooms[index]
        // Connect time and order are taken here, on arrival: a socket handed off from another
        // loop may reach its room after a later one, and the pre-auth cap evicts by arrival.
        let connectedAt = clock.monotonic(), id = SocketID(arrival)
        return .accept { [self] transport, leftover in
            let attach: @Sendable (any Transport) -> Void = { [self] transport in
                table.attach(transport, leftover: leftover, room: room, server: self, ip: ip, id: id, connectedAt: connectedAt)
            }
            if transport.loop === target { return attach(transport) }
            transport.handoff(to: target, then: attach)
        }
    }

    /// §2.3 step 5's answer, with its metric label.
    static let roomCapRefusal = GateRefusal(reason: RelayMetrics.Rejection.room_cap.rawValue, response: .text(503, "capacity"))
}
