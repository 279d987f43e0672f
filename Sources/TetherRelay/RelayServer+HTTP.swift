import TetherCrypto
public import TetherNet
import TetherService
import TetherStore
import TetherWire
import TetherEncoding

extension RelayServer {
    /// §2.2 steps 2–6, on the head alone, so they precede the body cap (step 7): the room gate,
    /// the request counter, the `/attest*` limiter and the room cap. The paths answered before
    /// the gate (step 1) pass through to `respond`.
    public func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        if isAnsweredBeforeTheGate(head) { return nil }
        return screen(head, ingress: .client, ip: { gate.clientIP(head, peer: peer) })
    }

    /// The gate for a request from a client or passed on by another node. One to be passed on
    /// again is let through to its body; the owner's gate decides.
    func screen(_ head: HTTPRequestHead, ingress: Ingress, ip: () -> String) -> HTTPResponse? {
        let room: RoomName
        switch admitRoom(head, ingress: ingress) {
        case let .failure(refusal): return refusal.response
        case .success(.forward): return nil
        case let .success(.serve(admitted)): room = admitted
        }
        metrics.httpRequest()
        if head.path.hasPrefix("/attest"), let refusal = gate.admitRequest(Self.attestLimiter, ip: ip()) {
            return refusal.response
        }
        guard hasRoomFor(room) else { return .text(503, "capacity") }
        return nil
    }

    /// §2.2 step 1: `/metrics` (any method), `/healthz` — unless `RELAY_PUBLIC_METRICS=false`
    /// keeps them to the admin listener — and `GET`/`HEAD /shardmap.json`.
    func isAnsweredBeforeTheGate(_ head: HTTPRequestHead) -> Bool {
        (configuration.publicMetrics && (head.path == "/metrics" || head.path == "/healthz"))
            || ((head.path == "/shardmap.json" || head.path == Self.identityPath) && (head.method == "GET" || head.method == "HEAD"))
    }

    /// §2.2 step 1, then step 8 for a request `screen` let through, through the router.
    public func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        routes.withLock { $0 }.route(request, reply: reply)
    }

    /// Everything the relay serves over plain HTTP. Any other method on these paths, and any other
    /// path that passed the gate, is 501 `not implemented` (the reference's answer).
    /// The relay reaches its handlers unowned: the router is its own property, so the relay
    /// outlives every request it routes.
    static func router(for relay: RelayServer) -> Router {
        let notImplemented = HTTPResponse.text(501, "not implemented", contentType: "text/plain;charset=UTF-8")
        var router = Router(methodMismatch: .respond { _, _ in notImplemented }, fallback: { _ in notImplemented })
        if relay.configuration.publicMetrics {
            router.add(Router.anyMethod, "/metrics") { [unowned relay] request, reply in relay.scrape(request, reply: reply) }
            router.add(Router.anyMethod, "/healthz") { [unowned relay] request, reply in relay.health(request, reply: reply) }
        }
        router.add("GET", "/shardmap.json") { [unowned relay] _, reply in relay.serveShardMap(reply: reply) }
        router.add("GET", identityPath) { [unowned relay] _, reply in reply(relay.identity) }
        for path in RoomEndpoints.routes.sorted() {
            router.add("POST", path) { [unowned relay] request, reply in relay.roomEndpoint(path, request, ingress: .client, reply: reply) }
        }
        return router
    }

    /// §2.2 step 8: the room's endpoint, run on the room's store lane (after the room's earlier
    /// storage work, before its later), and any teardown on the room's loop.
    /// In a v1 cluster the room's owner is asked again here: the map may have moved since `screen`.
    func roomEndpoint(_ path: String, _ request: HTTPServerRequest, ingress: Ingress, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        // `screen` has passed the gate, so the room header is present and valid.
        guard let room = roomName(request.head) else { return reply(.text(400, "bad room")) }
        switch route(room, ingress: ingress) {
        case .serve: break
        case let .refuse(response): return reply(response)
        case let .forward(owner): return forwardRequest(request, clientIP: gate.clientIP(request.head, peer: request.peer), owner: owner, reply: reply)
        }
        let index = room.bucket % group.loops.count
        let table = rooms[index]
        let body = request.body
        storage.submit(RoomKey(room)) { [self] store in
            let outcome = endpoints.handle(path: path, body: body, room: room, store: store, now: clock.wall()) { SecureRandom.bytes($0) }
            if outcome.status == 500 { metrics.httpError() }
            if let failure = outcome.storageFailure { storageFailed(failure) }
            diagnostic("relay \(room.logTag) POST \(path) -> \(outcome.status)\(outcome.diagnostic.map { " (\($0))" } ?? "")")
            guard outcome.tearDown else { return reply(.json(outcome.status, Array(outcome.json.utf8))) }
            group.loops[index].execute { [self] in
                write("relay \(room.logTag) teardown reason=room deleted")
                table.closeRoom(room, code: 1000, reason: "room deleted")
                reply(.json(outcome.status, Array(outcome.json.utf8)))
            }
        }
    }

    /// Where a client learns, before pairing, the origin this relay binds into every signature
    /// (Tether's addition beside relay.md §2.2 step 1): a link made for another spelling of the
    /// same relay (`localhost` for `127.0.0.1`) would pair and then fail every signed join.
    public static let identityPath = "/.well-known/tether-relay.json"

    /// `{"origin":"<RELAY_ORIGIN>","version":"<release>"}`: public facts only.
    var identity: HTTPResponse {
        HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json"), ("Cache-Control", "no-store")]),
                     body: Array(#"{"origin":\#(JSONValue.quoted(configuration.origin)),"version":"\#(TetherVersion.current)"}"#.utf8))
    }

    /// A request the room gate turned away.
    struct Refusal: Error {
        let response: HTTPResponse
    }

    /// A room the gate let through: served here, or passed to its owner.
    enum AdmittedRoom {
        case serve(RoomName)
        case forward(RoomName, owner: String)
    }

    /// §2.2 steps 2–3 and §2.3 step 1: Origin, then the room header, then (§8.4) the room's owner.
    func admitRoom(_ head: HTTPRequestHead, ingress: Ingress) -> Result<AdmittedRoom, Refusal> {
        if head.headers.contains("Origin") { return .failure(Refusal(response: .text(403, "forbidden"))) }
        guard let room = roomName(head) else { return .failure(Refusal(response: .text(400, "bad room"))) }
        switch route(room, ingress: ingress) {
        case .serve: return .success(.serve(room))
        case let .forward(owner): return .success(.forward(room, owner: owner))
        case let .refuse(response): return .failure(Refusal(response: response))
        }
    }

    /// The `x-relay-room` value with surrounding spaces and tabs trimmed (as Node does). Node joins
    /// duplicates with ", ", which can never be a room name, so more than one value fails.
    func roomName(_ head: HTTPRequestHead) -> RoomName? {
        guard let value = head.headers.only("x-relay-room") else { return nil }
        let utf8 = value.utf8
        guard let first = utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
              let last = utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return nil }
        return RoomName(header: String(value[first...last]))
    }
}
