public import TetherWire

/// Node leases for automatic shard failover (relay.md §8), kept by a store that several nodes
/// share. Every node renews its own lease; the one node elected for a round moves the buckets of
/// nodes whose lease lapsed to the nodes alive, in one transaction with the map's publication, or
/// gives a node that lost its buckets that way an even share back once it has proved itself.
/// Times are the database's own clock, so nodes' clocks need not agree.
public protocol NodeLeases: AnyObject, Sendable {
    /// Renews `host`'s lease for `rules.ttlMs` from now, and records whether its renewals have
    /// been continuous (`LeaseRules.continuityMs`). Returns the hosts whose lease is live now,
    /// `host` included, sorted: who may be named as a room's owner.
    @discardableResult
    func renewLease(host: String, rules: LeaseRules) throws(StoreError) -> [String]
    /// Runs one round for `host` if no other node is running one and `host` may (`LeaseRules`):
    /// returns the map published and why, or nil when nothing changed.
    func leaseRound(host: String, rules: LeaseRules) throws(StoreError) -> LeaseRound?
    /// Hosts whose lease is live now, sorted.
    func liveHosts() throws(StoreError) -> [String]
    /// Calls `changed` (on a thread of the store's) soon after any node publishes a map, and
    /// once whenever the watch (re)connects; until `stop()`.
    func watchShardMap(_ changed: @escaping @Sendable () -> Void) -> ShardMapWatch
}

/// A running `watchShardMap`.
public final class ShardMapWatch: Sendable {
    private let stopping: @Sendable () -> Void

    public init(stop: @escaping @Sendable () -> Void) { stopping = stop }

    public func stop() { stopping() }
}

/// What a lease round published.
public struct LeaseRound: Sendable, Equatable {
    public enum Change: Sendable, Equatable {
        /// These hosts' leases lapsed: their buckets moved to the nodes alive.
        case failover(lapsed: [String])
        /// These hosts lost their buckets to a failover and have renewed long enough since: each
        /// got an even share back, taken from the nodes holding more than theirs.
        case restored([String])
    }

    public let map: ShardMap
    public let change: Change

    public init(map: ShardMap, change: Change) {
        self.map = map
        self.change = change
    }
}

/// When a node may act on others' leases. A hung database, a paused node and a node restart all
/// look alike from one node's side — a lease that lapsed — so the rules are on the database's
/// clock and on the *acting* node's own record: it must have renewed without a gap for a while.
///
/// - A node is dead only when its lease lapsed while the acting node renewed continuously (no gap
///   over `continuityMs`) since before that node's own last renewal — so the database answered
///   the acting node all along and the dead node did not renew — or when the acting node has
///   renewed continuously for a whole lease plus `reconnectGraceMs` (every live node has renewed
///   by then, even one still backing off after an outage). A database that hangs for longer than
///   `continuityMs` breaks every node's continuity at once, so its resumption never moves a live
///   node's buckets, however the connections' answers are spread.
/// - A node that lost its buckets to a failover gets an even share back once it has renewed
///   continuously for `restoreAfterMs`: hysteresis, so a node that keeps stalling does not take
///   rooms back only to lose them again, and each return (which closes the moved rooms `4421`)
///   happens once per recovery.
public struct LeaseRules: Sendable, Equatable {
    /// How often a node renews: a tenth or less of any sensible lease.
    public static let renewMs: Int64 = 1_000
    /// The shortest lease that survives one late renewal with `continuityMs` between the renewal
    /// period and the lease (`RELAY_LEASE_TTL_MS` is refused below it).
    public static let minimumTTLms: Int64 = 3 * renewMs

    public let ttlMs: Int64
    /// A live node that no range names gets an even share once it has renewed continuously for
    /// `restoreAfterMs`, as a node that lost its buckets does. On for a v1 cluster, whose map
    /// names nodes only the nodes themselves use (`RELAY_NODE_URL`): a node started there must
    /// take its share by itself. Off for resolver v2, where adding a host to the public map is
    /// the operator's decision.
    public var placesNewNodes = false
    /// After an outage a live node may reconnect as late as the pool's longest back-off after
    /// another (seen under load: a node that waited only one lease took the buckets of a node
    /// alive and still backing off).
    public let reconnectGraceMs: Int64

    public init(ttlMs: Int64, reconnectGraceMs: Int64 = Int64(PostgresPool.maxBackoffNanos / 1_000_000)) {
        self.ttlMs = ttlMs
        self.reconnectGraceMs = reconnectGraceMs
    }

    /// A gap between two renewals longer than this ends a node's continuous run: half a lease.
    /// Longer than the renewal period (one late renewal is not a gap), and shorter than the
    /// lease less one period — the least a database hang must last to lapse another node's lease
    /// — so any hang that lapses a lease also breaks the acting node's continuity.
    public var continuityMs: Int64 { ttlMs / 2 }

    /// Continuous renewal after which a node may fail over nodes whose last renewal it did not see.
    public var settledMs: Int64 { ttlMs + reconnectGraceMs }

    /// Continuous renewal after which a node that lost its buckets gets a share back.
    public var restoreAfterMs: Int64 { 2 * ttlMs + reconnectGraceMs }
}
