import TetherNet
public import TetherStore
public import TetherWire

extension RelayServer {
    /// How often a node reads the shared map (§8.5 step 2: the old owner stops serving a moved
    /// bucket "immediately"). One single-row read a second is nothing next to the traffic, and a
    /// moved bucket is dropped within a second of the new map's commit.
    static let shardMapPollMs: UInt64 = 1_000

    /// §8.4: the 421 for a room whose bucket another node owns, or nil when this node serves it.
    /// While that owner's lease has lapsed (it died; the failover round is at most a second away)
    /// the answer is 503 `owner unavailable` with `Retry-After: 1` instead (Tether definition): a
    /// 421 would name the dead node, and clients would re-resolve to it and back off.
    ///
    /// A node whose own lease may have lapsed — no renewal has succeeded for a whole TTL: a paused
    /// process, a VM that stood still, a database it cannot reach — answers the same 503 for every
    /// room (self-fencing): its buckets may be another node's by now, and it must not admit a
    /// socket into a room another node serves before its next renewal and map read say whose the
    /// room is.
    func misdirected(_ room: RoomName) -> HTTPResponse? {
        let now = clock.monotonicMs()
        if now > leaseSurelyLiveUntil.load(ordering: .relaxed) { return Self.ownerUnavailableResponse }
        guard let owner = sharding.foreignOwner(of: room) else { return nil }
        guard !sharding.hasLapsed(owner, now: now) else { return Self.ownerUnavailableResponse }
        var response = HTTPResponse.text(421, "misdirected")
        response.headers.add("x-relay-owner", owner)
        return response
    }

    static let ownerUnavailable = "owner unavailable"

    static var ownerUnavailableResponse: HTTPResponse {
        var response = HTTPResponse.text(503, ownerUnavailable)
        response.headers.add("Retry-After", "1")
        return response
    }

    /// §8.3: `GET`/`HEAD /shardmap.json`, before the gate; the map is public.
    func serveShardMap(reply: @escaping @Sendable (HTTPResponse) -> Void) {
        guard let map = sharding.document else { return reply(.text(404, "no shard map")) }
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
        start(.shardMapPoll, every: Self.shardMapPollMs) { server in
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
        for (index, loop) in group.loops.enumerated() {
            let table = rooms[index]
            loop.execute { [sharding] in
                table.closeRooms { room in sharding.foreignOwner(of: room).map { (4421, ShardOwnership.reshardReason(owner: $0)) } }
            }
        }
    }
}
