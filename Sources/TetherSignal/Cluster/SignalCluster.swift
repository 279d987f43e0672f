import Synchronization
import TetherNet
import TetherService
import TetherStore
import TetherSync
import TetherWire

/// Several signaling nodes as one server (`SIGNAL_DB`): live IDs are claimed in the shared
/// registry, so a duplicate live ID is refused across nodes, and a signal for an ID another node
/// holds crosses to it over an authenticated cluster connection (`ClusterLink` out,
/// `ClusterListener` in) and is delivered there unchanged. Each node renews a lease every second;
/// a node that stops (crash, partition) frees its IDs when the lease lapses.
///
/// Registry calls block, so they run on store lanes; a sender's lookups and forwards share the
/// sender's lane, which keeps one sender's signals in order. Where a node is reached is cached
/// for a moment (a reconnect storm does not look every signal up), and dropped when the node
/// answers that the ID has gone.
///
/// What each failure answers: a claim the registry cannot make ends the registration
/// `unavailable` (close 1013, "try again later"); a signal whose recipient cannot be looked up
/// or reached is answered `offline`, the connection kept; presence falls back to this node's own
/// IDs. Nothing is queued for an ID no node holds.
final class SignalCluster: Sendable {
    /// This node's name in the registry: its cluster URL, unique per node.
    let node: String
    let registry: StoreExecutor<any SignalRegistry>
    let health = StoreHealth()
    let secret: [UInt8]
    let leaseTTLms: Int64
    private let directory: SignalDirectory
    private let loops: [EventLoop]
    private let links = Locked<[String: ClusterLink]>([:])
    private let locations = Locked<[SignalingID: (url: String, at: MonotonicInstant)]>([:])
    private let log: @Sendable (String) -> Void
    private let clock: ServiceClock
    /// When the last successful renewal began (`MonotonicInstant.nanoseconds`).
    private let lastRenewal = Atomic<UInt64>(0)

    /// How long a looked-up location is trusted without asking again.
    static let locationTTL: Duration = .seconds(2)
    /// Locations held at most: past it the stale ones go (a node reaching many IDs in 2 s keeps
    /// only those; the cache never grows with every ID it ever looked up).
    static let maxLocations = 65_536
    static let leaseRenewInterval: Duration = .seconds(1)

    init(node: String, registry: any SignalRegistry, secret: String, leaseTTLms: Int64, directory: SignalDirectory,
         loops: [EventLoop], clock: ServiceClock, log: @escaping @Sendable (String) -> Void) {
        self.node = node
        self.registry = StoreExecutor(store: registry)
        self.secret = Array(secret.utf8)
        self.leaseTTLms = leaseTTLms
        self.directory = directory
        self.loops = loops
        self.clock = clock
        self.log = log
    }

    private func lane(_ id: SignalingID) -> Int { Int(id.key[31]) % registry.laneCount }

    // MARK: Lease

    /// A node starting again holds no ID: its rows from before go, then its lease begins.
    func start() throws(StoreError) {
        try registry.store.forget(node: node)
        lastRenewal.store(clock.monotonic().nanoseconds, ordering: .relaxed)
        try registry.store.renewLease(node: node, forwardURL: node, ttlMs: leaseTTLms)
    }

    /// Renews the lease. When no renewal had succeeded for a whole lease before this one (a
    /// paused process, a VM that stood still, a registry it could not reach), the other nodes may
    /// have freed this node's IDs and let other sockets claim them: every registration here is
    /// ended `unavailable` (close 1013, try again later), which releases its rows, so an ID is never
    /// live on two nodes; the clients register again and the registry decides.
    func renewLease() {
        let started = clock.monotonic()
        registry.submit(lane: 0) { [self] registry in
            do throws(StoreError) {
                try registry.renewLease(node: node, forwardURL: node, ttlMs: leaseTTLms)
                answered()
                let previous = MonotonicInstant(nanoseconds: lastRenewal.exchange(started.nanoseconds, ordering: .relaxed))
                let silent = started.elapsed(since: previous)
                guard silent >= .milliseconds(leaseTTLms) else { return }
                let ended = directory.everySocket
                for socket in ended { socket.value.loop.execute { socket.value.end(with: .unavailable) } }
                locations.withLock { $0.removeAll() }
                log("signal: this node's lease lapsed (no renewal for \(silent.components.seconds) s); \(ended.count) registrations ended (1013) so their IDs are claimed anew")
            } catch {
                failed(error)
            }
        }
    }

    private func failed(_ error: StoreError) {
        if case .failing? = health.failed(error) {
            log("signal: shared registry unavailable: \(error.message); registrations refused (unavailable), other nodes' IDs unreachable")
        }
    }

    private func answered() {
        if case let .recovered(failures)? = health.succeeded() { log("signal: shared registry available again (\(failures) calls failed meanwhile)") }
    }

    // MARK: Registrations

    /// Claims `id` for this node; `done` runs on `loop` with true (claimed), false (another live
    /// node holds it) or nil (the registry did not answer).
    func claim(_ id: SignalingID, on loop: EventLoop, _ done: @escaping @Sendable (Bool?) -> Void) {
        registry.submit(lane: lane(id)) { [self] registry in
            let outcome: Bool?
            do throws(StoreError) {
                outcome = try registry.claim(id.canonical, node: node)
                answered()
            } catch {
                failed(error)
                outcome = nil
            }
            loop.execute { done(outcome) }
        }
    }

    func release(_ id: SignalingID) {
        registry.submit(lane: lane(id)) { [self] registry in
            do throws(StoreError) { try registry.release(id.canonical, node: node) } catch { failed(error) }
        }
    }

    // MARK: Signals

    /// Sends `message` (already checked and counted by its sender's socket) to the node holding
    /// its recipient; `offline` runs on the sender's loop when there is none or it cannot be
    /// reached.
    func forward(_ message: SignalMessage, offline: @escaping @Sendable () -> Void) {
        registry.submit(lane: lane(message.from)) { [self] registry in
            guard let url = location(of: message.to, in: registry), url != node else { return offline() }
            link(to: url).send(.signal(message))
        }
    }

    private func location(of id: SignalingID, in registry: any SignalRegistry) -> String? {
        let now = clock.monotonic()
        if let cached = locations.withLock({ $0[id] }), now.elapsed(since: cached.at) < Self.locationTTL { return cached.url }
        do throws(StoreError) {
            let url = try registry.locate(id.canonical)
            answered()
            locations.withLock { locations in
                if locations.count >= Self.maxLocations { locations = locations.filter { now.elapsed(since: $0.value.at) < Self.locationTTL } }
                if locations.count >= Self.maxLocations { locations.removeAll(keepingCapacity: true) }
                locations[id] = url.map { ($0, now) }
            }
            return url
        } catch {
            failed(error)
            return nil
        }
    }

    private func link(to url: String) -> ClusterLink {
        links.withLock { links in
            if let link = links[url] { return link }
            let link = ClusterLink(url: url, secret: secret, loop: loops[links.count % loops.count], cluster: self)
            links[url] = link
            return link
        }
    }

    /// What another node sent over a cluster connection; `reply` answers on that connection.
    func received(_ message: ClusterMessage, reply: @escaping @Sendable (ClusterMessage) -> Void) {
        switch message {
        case let .signal(signal):
            guard let recipient = directory.routableSocket(signal.to) else {
                return reply(.offline(sender: signal.from, recipient: signal.to, call: signal.call, kind: signal.kind))
            }
            let text = Array(signal.json().utf8)
            recipient.value.loop.execute { recipient.value.deliver(text) }
        case let .offline(sender, recipient, call, kind):
            locations.withLock { _ = $0.removeValue(forKey: recipient) }
            answerOffline(sender, call: call, kind: kind)
        }
    }

    /// A signal this node forwarded did not arrive (the link failed, or the ID had gone there).
    func bounced(_ message: SignalMessage) {
        locations.withLock { _ = $0.removeValue(forKey: message.to) }
        answerOffline(message.from, call: message.call, kind: message.kind)
    }

    private func answerOffline(_ sender: SignalingID, call: CallUUID, kind: SignalKind) {
        guard let socket = directory.routableSocket(sender) else { return }
        socket.value.loop.execute { socket.value.recipientOffline(call: call, kind: kind) }
    }

    // MARK: Presence

    /// Which of `ids` are online on any node; `done` runs on `loop`. `local` is this node's own
    /// answer, which stands when the registry cannot be asked.
    func online(_ ids: [SignalingID], local: [Bool], on loop: EventLoop, asker: SignalingID, _ done: @escaping @Sendable ([Bool]) -> Void) {
        let remote = zip(ids, local).filter { !$0.1 }.map(\.0.canonical)
        // Through the asker's lane even when nothing is remote: answers keep the queries' order.
        registry.submit(lane: lane(asker)) { [self] registry in
            guard !remote.isEmpty else { return loop.execute { done(local) } }
            let answer: [Bool]
            do throws(StoreError) {
                let elsewhere = try registry.online(remote)
                answered()
                answer = zip(ids, local).map { $0.1 || elsewhere.contains($0.0.canonical) }
            } catch {
                failed(error)
                answer = local
            }
            loop.execute { done(answer) }
        }
    }
}
