// The shard map a resolver serves (`/shardmap.json`, relay.md §8): read by every client and by
// every relay node from the store. Input: the document.
//
// A map that reads must tile the buckets, name an owner for every bucket (each a host the
// relay writes unescaped) and survive its own encoding.
import TetherWire

enum ShardMapFuzz {
    static func run(_ bytes: [UInt8]) {
        guard let map = try? ShardMap(json: bytes) else { return }
        expect((try? ShardMap(json: Array(map.json.utf8))) == map, "a shard map did not survive its encoding")
        expect(map.ranges.first?.low == 0 && map.ranges.last?.high == RoomName.bucketCount - 1, "a shard map that does not tile")
        for bucket in [0, 1, 255, 256, 32_767, 65_535] + map.ranges.flatMap({ [$0.low, $0.high] }) {
            let owner = map.owner(of: bucket)
            expect(map.ranges.contains { $0.low <= bucket && bucket <= $0.high && $0.host == owner }, "the wrong owner of a bucket")
        }
        for host in map.hosts { touch(RelayOrigin.origin(forShardHost: host)) }
    }
}

extension ShardMapFuzz {
    /// relay.md §8's documents (ShardMapTests): one owner, several, ports and IPv6 hosts, and
    /// maps that do not tile.
    static var seeds: [String: [UInt8]] {
        let documents = [
            "single": #"{"version":1,"ranges":[{"low":0,"high":65535,"host":"relay.example"}]}"#,
            "three": #"{"version":7,"ranges":[{"low":32768,"high":65535,"host":"c.example:8443"},{"low":0,"high":16383,"host":"a.example"},"#
                + #"{"low":16384,"high":32767,"host":"[::1]:4443"}],"extra":true}"#,
            "floats": #"{"version":2.0,"ranges":[{"low":0.0,"high":6.5535e4,"host":"xn--bcher-kva.example"}]}"#,
            "gap": #"{"version":1,"ranges":[{"low":0,"high":100,"host":"a"},{"low":102,"high":65535,"host":"b"}]}"#,
            "bad-host": #"{"version":1,"ranges":[{"low":0,"high":65535,"host":"Relay.example/"}]}"#,
        ]
        return documents.mapValues { Array($0.utf8) }
    }
}
