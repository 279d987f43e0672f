import TetherNet
public import TetherStore
public import TetherWire

extension RelayServer {
    /// How often a node reads the shared map (§8.5 step 2: the old owner stops serving a moved
    /// bucket "immediately"). One single-row read a second is nothing next to the traffic, and a
    /// moved bucket is dropped within a second of the new map's commit.
    static let shardMapPollInterval: Duration = .seconds(1)

    /// §8.4: where a room-scoped request or upgrade goes — served here; passed to the owner
    /// (a v1 cluster, `RELAY_NODE_URL`); or refused: 421 naming the owner (resolver v2), or 503
    /// `owner unavailable` with `Retry-After: 1` (Tether definition) while that owner's lease has
    /// lapsed (it died; the failover round is at most a second away) — a 421 would name the dead
    /// node, and clients would re-resolve to it and back off.
    ///
    /// A node whose own lease may have lapsed — no renewal has succeeded for a whole TTL: a paused
    /// process, a VM that stood still, a database it cannot reach — answers the same 503 for every
    /// room (self-fencing): its buckets may be another node's by now, and it must not admit a
    /// socket into a room another node serves before its next renewal and map read say whose the
    /// room is. A request another node passed here is never passed on again: while two nodes'
    /// maps disagree (for the moment a new one takes to reach both), it is the same 503.
    func route(_ room: RoomName, ingress: Ingress) -> RoomRoute {
        let now = clock.monotonic()
        if now.nanoseconds > leaseSurelyLiveUntil.load(ordering: .relaxed) { return .refuse(Self.ownerUnavailableResponse) }
        guard let owner = sharding.foreignOwner(of: room) else { return .serve }
        guard !sharding.hasLapsed(owner, now: now) else { return .refuse(Self.ownerUnavailableResponse) }
        if configuration.cluster != nil {
            guard case .client = ingress else { return .refuse(Self.ownerUnavailableResponse) }
            return .forward(owner: owner)
        }
        var response = HTTPResponse.text(421, "misdirected")
        response.headers.add("x-relay-owner", owner)
        return .refuse(response)
    }

    static let ownerUnavailable = "owner unavailable"

    static var ownerUnavailableResponse: HTTPResponse {
        var response = HTTPResponse.text(503, ownerUnavailable)
        response.headers.add("Retry-After", "1")
        return response
    }

    /// §8.3: `GET`/`HEAD /shardmap.json`, before the gate; the map is public.
    /// A v1 cluster's map names internal node addresses, which are nobody's business outside it
    /// (and no v1 client reads a map): it is not served.
    func serveShardMap(reply: @escaping @Sendable (HTTPResponse) -> Void) {
        guard configuration.cluster == nil, let map = sharding.document else { return reply(.text(404, "no shard map")) }
        reply(HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/json"), ("Cache-Control", "no-store")]),
                           body: Array(map.json.utf8)))
    }

    /// Publishes `map` to the shared store (versions only grow) and adopts it here at once. It
    /// blocks on the store: call it from a command or a test, never on a loop.
    public func publish(_ map: ShardMap) throws(StoreError) -> Bool {
        let stored = try store.publishShardMap(map)
        adoptStoredMap(from: store)
        return stored
    }

    /// The line every node prints when it takes a map, at start-up and on every change.
    func adoptedLine(_ map: ShardMap) -> String {
        "relay: shard map version \(map.version) adopted; this node (\(sharding.host)) owns \(sharding.ownedBuckets(in: map)) of \(RoomName.bucketCount) buckets"
    }

    func startShardMapWatch() {
        start(.shardMapPoll, every: Self.shardMapPollInterval) { server in
            server.storage.submit(lane: 0) { store in
                server.adoptStoredMap(from: store)
                server.probeStorage(store)
            }
        }
    }


    /// Adopts a newer stored map, then closes every socket of every resident room this node no
    /// longer owns with 4421 `reshard <owner>` (§8.4) — each room on its own loop. Both legs get
    /// the close: it is the relay's, so peer propagation does not apply. Reads the store, so it
    /// runs on a store lane (or a caller's own thread).
    func adoptStoredMap(from store: any RoomStore) {
        let stored: ShardMap?
        do {
            stored = try store.shardMap()
        } catch {
            // The map in force stays: a node never drops buckets because it could not read.
            return storageFailed(error)
        }
        guard let map = stored, sharding.adopt(map) else { return }
        metrics.shardMapAdopted(version: map.version)
        write(adoptedLine(map))
        // A v1 cluster's owners are internal addresses: its clients get the bare `reshard`.
        let namesOwner = configuration.cluster == nil
        for (index, loop) in group.loops.enumerated() {
            let table = rooms[index]
            loop.execute { [sharding] in
                table.closeRooms { room in
                    sharding.foreignOwner(of: room).map { (4421, namesOwner ? ShardOwnership.reshardReason(owner: $0) : "reshard") }
                }
            }
        }
    }
}
