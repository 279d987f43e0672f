/// The signaling server's live registrations shared by several nodes (signaling.md §6.1, across
/// nodes): which node holds each registered ID, and each node's lease and forwarding address. A
/// live ID is held by one node at a time: a claim never takes an ID from a node whose lease is
/// live, and a node's IDs are free once its lease lapses. IDs are public keys, not secrets; the
/// registry holds nothing else (no signals, no bodies, no addresses of clients).
///
/// Calls block (a networked database): a server makes them on store lanes, never on a loop.
public protocol SignalRegistry: AnyObject, Sendable {
    /// Renews `node`'s lease for `ttlMs` and records where other nodes reach it.
    func renewLease(node: String, forwardURL: String, ttlMs: Int64) throws(StoreError)
    /// Takes `id` for `node`; false when a node with a live lease holds it (a duplicate ID).
    func claim(_ id: String, node: String) throws(StoreError) -> Bool
    /// Gives `id` back, if `node` holds it.
    func release(_ id: String, node: String) throws(StoreError)
    /// Where the node holding `id` is reached, if a node with a live lease holds it.
    func locate(_ id: String) throws(StoreError) -> String?
    /// Which of `ids` a node with a live lease holds.
    func online(_ ids: [String]) throws(StoreError) -> Set<String>
    /// Drops every ID `node` held (a node starting again holds none).
    func forget(node: String) throws(StoreError)
}
