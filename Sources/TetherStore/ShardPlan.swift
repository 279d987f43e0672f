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

    /// The map with each `returning` host given an even share (the bucket count over every host
    /// of the new map) taken from the hosts holding more than theirs — cut from the top of their
    /// ranges, so only those buckets move and every other room stays where it is — adjacent ranges
    /// merged, and the version one higher. How a node that lost its buckets to a failover gets
    /// them back without an operator. Nil when no returning host is short of its share.
    public static func restore(_ map: ShardMap, returning: Set<String>) -> ShardMap? {
        let hosts = Set(map.hosts).union(returning).sorted()
        let count = RoomName.bucketCount
        var owned: [String: Int] = [:]
        for range in map.ranges { owned[range.host, default: 0] += range.high - range.low + 1 }
        var target: [String: Int] = [:]
        for (index, host) in hosts.enumerated() { target[host] = count / hosts.count + (index < count % hosts.count ? 1 : 0) }
        var short = returning.sorted().compactMap { host -> (host: String, need: Int)? in
            let need = target[host]! - owned[host, default: 0]
            return need > 0 ? (host, need) : nil
        }
        guard !short.isEmpty else { return nil }
        var excess = Dictionary(uniqueKeysWithValues: hosts.map { ($0, max(0, owned[$0, default: 0] - target[$0]!)) })
        var ranges: [ShardMap.Range] = []
        for range in map.ranges.sorted(by: { $0.low < $1.low }) {
            var high = range.high
            while high >= range.low, excess[range.host]! > 0, let heir = short.first {
                let size = min(heir.need, excess[range.host]!, high - range.low + 1)
                ranges.append(ShardMap.Range(low: high - size + 1, high: high, host: heir.host))
                high -= size
                excess[range.host]! -= size
                if size == heir.need { short.removeFirst() } else { short[0].need -= size }
            }
            if high >= range.low { ranges.append(ShardMap.Range(low: range.low, high: high, host: range.host)) }
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
