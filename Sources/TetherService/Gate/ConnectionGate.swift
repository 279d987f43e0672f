public import TetherNet
import TetherSync

/// The entry limits every service shares (relay.md §2.3–§2.6), one instance for all loops:
/// who the client is (`ClientIPResolver`), per-IP rate limits on socket admissions and on named
/// kinds of request, per-IP and total socket caps, each refusal answered as the service says,
/// and each socket's place released when it closes.
///
/// Windows run on the injected monotonic clock (so tests move time by hand): a
/// wall-clock step must neither open nor extend a window. Checks are check-then-act under one
/// lock, so concurrent admissions never overshoot a cap.
public final class ConnectionGate: Sendable {
    /// How a request's client key is derived (§2.4).
    public let clientIPResolver: ClientIPResolver
    private let onRefusal: @Sendable (_ what: String, GateRefusal) -> Void
    /// The limits and their refusals, fixed for the gate's life.
    public let limits: Limits
    private let clock: any NetClock
    private let state: Locked<State>

    struct State: ~Copyable {
        var socketLimiter: FixedWindowLimiter<String>
        var requestLimiters: [String: FixedWindowLimiter<String>]
        var socketsPerIP: [String: Int] = [:]
        /// Connections not upgraded (yet), by TCP peer address.
        var connectionsPerPeer: [String: Int] = [:]
        var totalSockets = 0
        var arrivals: UInt64 = 0
    }

    /// A gate applying `limits` to the clients `clientIP` names.
    ///
    /// - Parameters:
    ///   - clientIP: which address is the client's (the socket's peer, or a trusted proxy's header).
    ///   - limits: the rates, caps and refusals the service's protocol asks for.
    ///   - clock: monotonic nanoseconds (`ManualClock` in tests); windows are kept in ms.
    /// - Parameter onRefusal: told of each refusal (what was refused, and why), outside the
    ///   gate's lock: the service logs it at debug. Never given the client's address.
    public init(clientIP: ClientIPResolver = ClientIPResolver(), limits: Limits, clock: any NetClock = MonotonicClock(),
                onRefusal: @escaping @Sendable (_ what: String, GateRefusal) -> Void = { _, _ in }) {
        self.onRefusal = onRefusal
        precondition(limits.maxSocketsPerIP > 0 && limits.maxTotalSockets > 0, "socket caps are positive (Int.max for none)")
        clientIPResolver = clientIP
        self.limits = limits
        self.clock = clock
        let keys = limits.maxTrackedIPs
        state = Locked(State(
            socketLimiter: FixedWindowLimiter(limit: limits.socketRate.limit, window: limits.socketRate.window, maxKeys: keys),
            requestLimiters: limits.requestLimits.mapValues { FixedWindowLimiter(limit: $0.rate.limit, window: $0.rate.window, maxKeys: keys) }))
    }

    /// The key a request is counted against: `CF-Connecting-IP` / `X-Forwarded-For` as far as
    /// they are trusted (§2.4), else the TCP peer.
    public func clientIP(_ head: HTTPRequestHead, peer: SocketAddress?) -> String {
        clientIPResolver.clientIP(cfConnectingIP: head.headers["CF-Connecting-IP"], forwardedFor: head.headers["X-Forwarded-For"],
                                  peer: peer?.host)
    }

    /// Counts a request against the named per-IP limiter; nil lets it through.
    public func admitRequest(_ limiter: String, ip: String) -> GateRefusal? {
        guard let configured = limits.requestLimits[limiter] else { preconditionFailure("no request limiter \(limiter)") }
        let now = clock.now()
        let allowed = state.withLock { $0.requestLimiters[limiter]!.hit(ip, now: now) }
        guard !allowed else { return nil }
        let refusal = GateRefusal(reason: limiter, response: configured.refusal)
        onRefusal("request", refusal)
        return refusal
    }

    /// Admits a socket from `ip`, in the limits' order (relay.md §2.3's by default: the rate
    /// limit, which counts every attempt, the per-IP cap, the total cap), then the service's own check (a room cap, say), which runs
    /// under the gate's lock so nothing changes between the checks and taking the place. The
    /// lease holds the place until released.
    ///
    /// `check` must be quick and must not call back into the gate; it may take a lock of the
    /// service's own if the service never calls the gate while holding that lock.
    public func admitSocket(ip: String, check: () -> GateRefusal? = { nil }) -> Result<SocketLease, GateRefusal> {
        admitSocketPlace(ip: ip, check: check).map { SocketLease(ip: ip, arrival: $0, gate: self) }
    }

    /// `admitSocket` without a lease object, for a service that already keeps each socket's
    /// client key in an entry of its own (a relay room's member list: an object per parked socket
    /// is memory every idle connection pays for). Returns the socket's arrival number; the caller
    /// must call `releaseSocket(ip:)` exactly once when the socket closes.
    public func admitSocketPlace(ip: String, check: () -> GateRefusal? = { nil }) -> Result<UInt64, GateRefusal> {
        let now = clock.now()
        let admitted: Result<UInt64, GateRefusal> = state.withLock { state in
            if let refusal = socketChecks(&state, ip: ip, held: state.socketsPerIP[ip, default: 0], now: now) { return .failure(refusal) }
            if let refusal = check() { return .failure(refusal) }
            state.socketsPerIP[ip, default: 0] += 1
            state.totalSockets += 1
            state.arrivals += 1
            return .success(state.arrivals)
        }
        if case let .failure(refusal) = admitted { onRefusal("upgrade", refusal) }
        return admitted
    }

    /// Admits a connection from TCP peer `peer` as it is accepted, before its head is read: an
    /// address may hold as many connections that have not upgraded as the per-IP cap allows it
    /// sockets, so a thousand heads trickling in from one address are refused at once instead of
    /// each holding a descriptor until the head timeout. They are capped apart from its sockets,
    /// not with them: a head from an address at its socket cap must still be read, since the
    /// protocols answer some refusals before the cap's (relay.md §2.3 and signaling.md §13.1: a
    /// bad Origin is 403 even at the cap). Nil admits it; the caller then calls
    /// `connectionLeft(peer:)` once it closes or upgrades.
    ///
    /// Only the TCP peer is known here. Behind a trusted proxy that is the proxy, whose
    /// connections carry every client, so nothing is counted: the proxy owns slow heads there.
    ///
    /// A connection refused here is answered as the socket checks answer an upgrade at the per-IP
    /// cap, the checks the order puts before that cap included: on the relay the upgrade rate
    /// limit counts it (and past its budget answers `rate limited`), since to the client it is an
    /// upgrade refused at step 3, and §2.3 counts every one of those. Otherwise a burst refused
    /// at accept would spend nothing, and the address's next minute would start with a full budget.
    public func admitConnection(peer address: SocketAddress?) -> GateRefusal? {
        guard countsConnections else { return nil }
        let peer = key(address)
        let now = clock.now()
        let refusal: GateRefusal? = state.withLock { state in
            let held = state.connectionsPerPeer[peer, default: 0]
            guard held < limits.maxSocketsPerIP else {
                return socketChecks(&state, ip: peer, held: held, now: now)
            }
            state.connectionsPerPeer[peer] = held + 1
            return nil
        }
        if let refusal { onRefusal("connection", refusal) }
        return refusal
    }

    /// The socket checks in the limits' order for `ip`, which holds `held` places of the per-IP
    /// cap's kind; the first refusal, or nil. The rate check counts the attempt as it passes.
    private func socketChecks(_ state: inout State, ip: String, held: Int, now: MonotonicInstant) -> GateRefusal? {
        for step in limits.socketCheckOrder {
            switch step {
            case .rate:
                guard state.socketLimiter.hit(ip, now: now) else {
                    return GateRefusal(reason: GateRefusal.rateLimited, response: limits.socketRateRefusal)
                }
            case .perIP:
                guard held < limits.maxSocketsPerIP else { return GateRefusal(reason: GateRefusal.ipCap, response: limits.perIPRefusal) }
            case .total:
                guard state.totalSockets < limits.maxTotalSockets else {
                    return GateRefusal(reason: GateRefusal.totalCap, response: limits.totalRefusal)
                }
            }
        }
        return nil
    }

    /// A connection admitted by `admitConnection` closed or upgraded.
    public func connectionLeft(peer address: SocketAddress?) {
        guard countsConnections else { return }
        let peer = key(address)
        state.withLock { state in
            if let count = state.connectionsPerPeer[peer] { state.connectionsPerPeer[peer] = count > 1 ? count - 1 : nil }
        }
    }

    /// Connections from `peer` not upgraded now.
    public func openConnections(from peer: SocketAddress?) -> Int { state.withLock { $0.connectionsPerPeer[key(peer)] ?? 0 } }

    /// The key a connection counts against before its head: the TCP peer, as `clientIP` gives it
    /// when no header is trusted (so it meets the same socket count after the upgrade).
    private func key(_ peer: SocketAddress?) -> String {
        clientIPResolver.clientIP(cfConnectingIP: nil, forwardedFor: nil, peer: peer?.host)
    }

    private var countsConnections: Bool {
        !clientIPResolver.trustProxy && !clientIPResolver.trustCloudflare && limits.maxSocketsPerIP < Int.max
    }

    /// Sockets holding a place now.
    public var openSockets: Int { state.withLock { $0.totalSockets } }

    /// Sockets `ip` holds now.
    public func openSockets(for ip: String) -> Int { state.withLock { $0.socketsPerIP[ip] ?? 0 } }

    /// Addresses holding at least one socket (the per-IP table's size, for a gauge).
    public var addressesWithSockets: Int { state.withLock { $0.socketsPerIP.count } }

    /// Gives back a place taken with `admitSocketPlace` (a lease does this itself).
    public func releaseSocket(ip: String) {
        state.withLock { state in
            state.totalSockets -= 1
            if let count = state.socketsPerIP[ip] { state.socketsPerIP[ip] = count > 1 ? count - 1 : nil }
        }
    }
}
