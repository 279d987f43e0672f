import TetherNet
import TetherStore
public import TetherWire
public import TetherSync

/// Which buckets this node serves (relay.md §8.3): all of them until a shard map is published,
/// then those of the ranges whose host is this node's own (`RELAY_ORIGIN` without its scheme).
/// Read on every room-scoped request and upgrade, replaced when a newer map is seen.
public final class ShardOwnership: Sendable {
    /// This node's host as the map spells it: `host` or `host:port`.
    public let host: String

    private struct Held {
        var map: ShardMap?
        /// Hosts with a live lease as of this node's last renewal, and when that was; nil without leases (one node, a SQLite store), when every owner counts as reachable.
        var live: (hosts: Set<String>, at: MonotonicInstant)?
    }

    private let held: Locked<Held>

    /// How old a renewal's list of live hosts may be and still show an owner lapsed: three
    /// renewals. A node whose own renewals lag (a busy store lane, a database outage) knows
    /// nothing fresh, and then names the owner as the map does.
    static let liveHostsFresh: Duration = .milliseconds(3 * LeaseRules.renewMs)

    /// Ownership for the node `host` (as the map spells it), starting from `map` if one is known.
    public init(host: String, map: ShardMap? = nil) {
        self.host = host
        held = Locked(Held(map: map))
    }

    /// Ownership for the node whose `RELAY_ORIGIN` is `origin` (its host, without the scheme).
    public convenience init(origin: String) { self.init(host: ShardOwnershipHost.of(origin: origin)) }

    /// The newest map seen; nil until one is published (then this node serves every bucket).
    public var map: ShardMap? { held.withLock { $0.map } }

    /// The map clients should fetch: the published one, or — before any is published — version 0
    /// with this node owning every bucket, so a lone node can serve v2 links by itself and any
    /// published map (version ≥ 1) supersedes it. Nil only if this node's own host is not a valid
    /// map host (a hand-set local origin), when there is nothing truthful to publish.
    public var document: ShardMap? {
        held.withLock { $0.map } ?? (try? ShardMap.single(host: host, version: 0))
    }

    /// The host that owns `room` when it is not this node; nil when this node serves it.
    public func foreignOwner(of room: RoomName) -> String? {
        held.withLock {
            guard let map = $0.map else { return nil }
            let owner = map.owner(of: room)
            return owner == host ? nil : owner
        }
    }

    /// Records who holds a live lease (each renewal, at `now`).
    public func setLiveHosts(_ hosts: Set<String>, at now: MonotonicInstant) { held.withLock { $0.live = (hosts, now) } }

    /// Whether `owner` let its lease lapse (dead, or cut off from the database), by a renewal at
    /// most `liveHostsFresh` old: its rooms are about to move, and naming it would send
    /// clients to a node that cannot serve them.
    public func hasLapsed(_ owner: String, now: MonotonicInstant) -> Bool {
        held.withLock {
            guard let live = $0.live, now.elapsed(since: live.at) <= Self.liveHostsFresh else { return false }
            return !live.hosts.contains(owner)
        }
    }

    /// Takes `map` if its version is above the held one; true if it did.
    @discardableResult
    public func adopt(_ map: ShardMap) -> Bool {
        held.withLock {
            guard map.version > $0.map?.version ?? 0 else { return false }
            $0.map = map
            return true
        }
    }

    /// How many buckets `map` gives this node.
    public func ownedBuckets(in map: ShardMap) -> Int {
        map.ranges.filter { $0.host == host }.reduce(0) { $0 + $1.high - $1.low + 1 }
    }

    /// The close reason for a socket whose room moved to `owner`: `reshard <owner>`, or bare
    /// `reshard` (which clients recognise too) when the host would overflow the 123-byte limit.
    public static func reshardReason(owner: String) -> String {
        let reason = "reshard \(owner)"
        return reason.utf8.count <= 123 ? reason : "reshard"
    }
}

/// A node's map host from its origin (§8.3: `RELAY_ORIGIN` is exactly `https://<host>`).
enum ShardOwnershipHost {
    /// `https://relay.example.com:8443` → `relay.example.com:8443`.
    static func of(origin: String) -> String {
        guard let range = origin.range(of: "://") else { return origin }
        return String(origin[range.upperBound...])
    }
}
