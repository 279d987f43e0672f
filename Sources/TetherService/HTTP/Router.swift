public import TetherNet

/// A method + exact-path router for a service's HTTP server. Paths are matched exactly (no
/// patterns, no trailing-slash folding: relay.md §2.2 routes on the exact pathname; the query is
/// ignored). A path that exists with another method gets the router's `methodMismatch` answer
/// (405 with `Allow` by default, or the service's own, e.g. the relay's 501); any other path gets
/// the service's `fallback`.
///
/// A `GET` route also answers `HEAD` (the server sends the head without the body), unless a
/// `HEAD` route of its own is added. `Router.anyMethod` matches every method (the reference's
/// `/metrics`).
public struct Router: Sendable {
    /// Answers a request: call `reply` exactly once, from any thread.
    public typealias Handler = @Sendable (HTTPServerRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void

    /// What a path that exists, asked with a method it does not take, is answered.
    public enum MethodMismatch: Sendable {
        /// 405 `method not allowed` with `Allow` listing the path's methods.
        case methodNotAllowed
        /// The service's own answer, given the request and the methods the path takes.
        case respond(@Sendable (HTTPServerRequest, _ allowed: [String]) -> HTTPResponse)
    }

    /// The outcome of matching a method and path.
    public enum Match {
        /// A route takes the method: answer with its handler.
        case handler(Handler)
        /// The path exists, but not for this method; `allowed` lists the methods it takes.
        case methodNotAllowed(allowed: [String])
        /// No route has this path.
        case notFound
    }

    /// The method of a route that takes any method.
    public static let anyMethod = "*"

    private var routes: [String: [(method: String, handler: Handler)]] = [:]
    /// How a path asked with a method it does not take is answered.
    public var methodMismatch: MethodMismatch
    /// The answer to a path with no route.
    public var fallback: @Sendable (HTTPServerRequest) -> HTTPResponse

    /// A router with no routes yet.
    ///
    /// - Parameters:
    ///   - methodMismatch: the answer to a known path asked with another method (405 by default).
    ///   - fallback: the answer to a path with no route (default 404 `not found`).
    public init(methodMismatch: MethodMismatch = .methodNotAllowed,
                fallback: @escaping @Sendable (HTTPServerRequest) -> HTTPResponse = { _ in .text(404, "not found") }) {
        self.methodMismatch = methodMismatch
        self.fallback = fallback
    }

    /// Adds a route answered later (from any thread, e.g. a room's loop).
    public mutating func add(_ method: String, _ path: String, _ handler: @escaping Handler) {
        precondition(path.hasPrefix("/"), "a route's path starts with /: \(path)")
        precondition(!(routes[path] ?? []).contains { $0.method == method }, "\(method) \(path) routed twice")
        routes[path, default: []].append((method, handler))
    }

    /// Adds a route answered at once.
    public mutating func add(_ method: String, _ path: String, respond: @escaping @Sendable (HTTPServerRequest) -> HTTPResponse) {
        add(method, path) { request, reply in reply(respond(request)) }
    }

    /// The route for `method` and `path` (the path without its query).
    public func match(method: String, path: some StringProtocol) -> Match {
        guard let candidates = routes[String(path)] else { return .notFound }
        if let exact = candidates.first(where: { $0.method == method }) { return .handler(exact.handler) }
        if method == "HEAD", let get = candidates.first(where: { $0.method == "GET" }) { return .handler(get.handler) }
        if let any = candidates.first(where: { $0.method == Self.anyMethod }) { return .handler(any.handler) }
        return .methodNotAllowed(allowed: Self.allowed(candidates.map(\.method)))
    }

    /// Whether some route (of any method) has this path: for a server deciding, on the head
    /// alone, whether a request is one of its own before any gate.
    public func hasRoute(path: some StringProtocol) -> Bool { routes[String(path)] != nil }

    /// Answers `request` through its route, the mismatch answer or the fallback.
    public func route(_ request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        switch match(method: request.head.method, path: request.head.path) {
        case let .handler(handler):
            handler(request, reply)
        case let .methodNotAllowed(allowed):
            switch methodMismatch {
            case .methodNotAllowed:
                var response = HTTPResponse.text(405, "method not allowed")
                response.headers.add("Allow", allowed.joined(separator: ", "))
                reply(response)
            case let .respond(answer):
                reply(answer(request, allowed))
            }
        case .notFound:
            reply(fallback(request))
        }
    }

    /// The `Allow` list: HEAD wherever GET is, in a stable order.
    private static func allowed(_ methods: [String]) -> [String] {
        var all = methods
        if all.contains("GET"), !all.contains("HEAD") { all.append("HEAD") }
        return all.sorted()
    }
}
