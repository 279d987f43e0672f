public import TetherNet
import TetherService

extension PushServer {
    /// Which profile answers `path` (push.md §1): with one profile enabled, that one answers
    /// everything; with both, paths under `/v1/` are Profile M's and all others Profile I's.
    func profile(for path: some StringProtocol) -> PushProfiles {
        let enabled = configuration.profiles
        if enabled == [.mytty] || enabled == [.iterm2] { return enabled }
        return path.hasPrefix("/v1/") ? .mytty : .iterm2
    }

    /// An address's open connections are capped at `PUSH_MAX_CONNECTIONS_PER_IP`
    /// (`ConnectionGate.admitConnection`): past it a connection is answered this at accept,
    /// before any request, so in neither profile's words.
    static let tooManyConnections = PushAnswer.error(429, "too many connections")

    public func admitConnection(peer: SocketAddress?) -> HTTPResponse? {
        guard let refusal = gate.admitConnection(peer: peer) else { return nil }
        metrics.connectionsRefused.increment()
        return refusal.response
    }

    public func connectionLeft(peer: SocketAddress?) { gate.connectionLeft(peer: peer) }

    static let myttyPaths: Set<String> = ["/v1/register", "/v1/push"]
    static let itermPaths: Set<String> = ["/register", "/push", "/push/mutable"]

    /// The answers decided on the head alone, before any body byte is read: the route (Profile M:
    /// 404; Profile I: 405, then 404) and Profile M's step 1 (§2.5: the credentials precede the
    /// size check).
    public func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? {
        guard let answer = headAnswer(head) else { return nil }
        metrics.answered(answer.status)
        return answer.response
    }

    func headAnswer(_ head: HTTPRequestHead) -> PushAnswer? {
        if profile(for: head.path) == .mytty {
            guard head.method == "POST", Self.myttyPaths.contains(String(head.path)) else { return MyttyProfile.notFound }
            if head.path == "/v1/push", MyttyProfile.credentials(head, nowSeconds: UInt64(clock.wall().unixSeconds)) == nil {
                metrics.pushes.increment()
                metrics.badSecrets.increment()
                diagnostic("push: mytty /v1/push -> 401 (credentials)")
                return MyttyProfile.unauthorized
            }
            return nil
        }
        guard head.method == "POST" else { return ITermProfile.postOnly }
        guard Self.itermPaths.contains(String(head.path)) else { return ITermProfile.noSuchEndpoint }
        return nil
    }

    /// Bodies within the cap are at most this many bytes (§1.1: 4,096 UTF-16 units); a larger
    /// declared length is refused before it is read.
    public func bodyLimit(for head: HTTPRequestHead) -> Int { BodySize.maxBytes }

    /// A body over the cap gets the profile's answer (Profile M 413, Profile I 400), the same
    /// as one measured over it after reading.
    public func refusal(for error: HTTPParseError, head: HTTPRequestHead?) -> HTTPResponse? {
        guard error.status == 413, let head else { return nil }
        let answer = profile(for: head.path) == .mytty ? MyttyProfile.payloadTooLarge : ITermProfile.requestTooLarge
        metrics.answered(answer.status)
        return answer.response
    }

    public func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        routes.withLock { $0 }.route(request, reply: reply)
    }

    /// The routes of the enabled profiles; anything else gets the profile's own answer.
    static func router(for push: PushServer) -> Router {
        let other: @Sendable (HTTPServerRequest) -> HTTPResponse = { [unowned push] request in
            let answer = push.headAnswer(request.head) ?? ITermProfile.noSuchEndpoint
            push.metrics.answered(answer.status)
            return answer.response
        }
        var router = Router(methodMismatch: .respond { request, _ in other(request) }, fallback: other)
        func add(_ path: String, _ handler: @escaping @Sendable (PushServer, HTTPServerRequest, @escaping @Sendable (PushAnswer) -> Void) -> Void) {
            router.add("POST", path) { [unowned push] request, reply in
                handler(push, request) { answer in
                    push.metrics.answered(answer.status)
                    reply(answer.response)
                }
            }
        }
        if push.configuration.profiles.contains(.mytty) {
            add("/v1/register") { push, request, reply in push.myttyRegister(request, reply: reply) }
            add("/v1/push") { push, request, reply in push.myttyPush(request, reply: reply) }
        }
        if push.configuration.profiles.contains(.iterm2) {
            add("/register") { push, request, reply in push.itermRegister(request, reply: reply) }
            add("/push") { push, request, reply in push.itermPush(.plain, request, reply: reply) }
            add("/push/mutable") { push, request, reply in push.itermPush(.mutable, request, reply: reply) }
        }
        return router
    }

    /// The store lane of a registration key: one key's calls run in order on one lane.
    func lane(_ key: String) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in key.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(storage.laneCount))
    }
}
