public import TetherWire

/// Node leases for automatic shard failover (relay.md §8), kept by a store that several nodes
/// share. Every node renews its own lease; the one node elected for a round moves the buckets of
/// nodes whose lease lapsed to the nodes alive, in one transaction with the map's publication.
/// Times are the database's own clock, so nodes' clocks need not agree.
public protocol NodeLeases: AnyObject, Sendable {
    /// Renews `host`'s lease for `ttlMs` from now.
    func renewLease(host: String, ttlMs: Int64) throws(StoreError)
    /// Runs one failover round if no other node is running one: returns the map published and the
    /// hosts whose buckets moved, or nil when this node was not elected or nothing had lapsed.
    func failOver() throws(StoreError) -> (map: ShardMap, lapsed: [String])?
    /// Hosts whose lease is live now, sorted.
    func liveHosts() throws(StoreError) -> [String]
}
