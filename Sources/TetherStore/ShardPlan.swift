public import TetherWire

/// How a shard map changes when nodes come and go (relay.md §8.5's step 1), as pure functions of
/// the map and the nodes alive: the database side only decides who is alive and publishes.
public enum ShardPlan {
    /// The map with every bucket of `dead` hosts given to `survivors`, spread evenly (each dead
    /// range cut into contiguous pieces dealt in turn, so survivors' shares differ by at most one
    /// piece), adjacent ranges of one host merged, and the version one higher. Nil when nothing
    /// changes (no dead host owns a bucket) or no survivor is left to take them.
    public static func failover(_ map: ShardMap, dead: Set<String>, survivors: [String]) -> ShardMap? {
        let heirs = survivors.filter { !dead.contains($0) }.sorted()
        guard !heirs.isEmpty, map.ranges.contains(where: { dead.contains($0.host) }) else { return nil }
        let orphaned = map.ranges.filter { dead.contains($0.host) }.reduce(0) { $0 + $1.high - $1.low + 1 }
        // Start with the heir owning least, so repeated failovers even out rather than pile up.
        var owned = Dictionary(uniqueKeysWithValues: heirs.map { host in
            (host, map.ranges.filter { $0.host == host }.reduce(0) { $0 + $1.high - $1.low + 1 })
        })
        let share = max(1, (orphaned + heirs.count - 1) / heirs.count)
        var ranges: [ShardMap.Range] = []
        for range in map.ranges {
            guard dead.contains(range.host) else {
                ranges.append(range)
                continue
            }
            var low = range.low
            while low <= range.high {
                let high = min(range.high, low + share - 1)
                let heir = heirs.min { (owned[$0]!, $0) < (owned[$1]!, $1) }!
                ranges.append(ShardMap.Range(low: low, high: high, host: heir))
                owned[heir]! += high - low + 1
                low = high + 1
            }
        }
        return try? ShardMap(version: map.version + 1, ranges: merged(ranges))
    }

    /// Every bucket dealt evenly over `hosts` (sorted, one contiguous range each), at
    /// `version`: what an operator publishes to give a returned node its share
    /// (`tether shardmap rebalance`).
    public static func even(hosts: [String], version: Int) -> ShardMap? {
        let hosts = Array(Set(hosts)).sorted()
        guard !hosts.isEmpty else { return nil }
        let count = RoomName.bucketCount
        let ranges = hosts.enumerated().map { index, host in
            ShardMap.Range(low: index * count / hosts.count, high: (index + 1) * count / hosts.count - 1, host: host)
        }
        return try? ShardMap(version: version, ranges: ranges)
    }

    private static func merged(_ ranges: [ShardMap.Range]) -> [ShardMap.Range] {
        var result: [ShardMap.Range] = []
        for range in ranges.sorted(by: { $0.low < $1.low }) {
            if let last = result.last, last.host == range.host, last.high + 1 == range.low {
                result[result.count - 1] = ShardMap.Range(low: last.low, high: range.high, host: range.host)
            } else {
                result.append(range)
            }
        }
        return result
    }
}
