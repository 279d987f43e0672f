import TetherEncoding
/// The resolver v2 shard map (relay.md §8.2, client.md §5): which host owns each of the 65,536
/// room buckets. A value of this type has passed every rule a client applies, so a node can only
/// ever publish a map that clients will adopt.
public struct ShardMap: Sendable, Equatable {
    public struct Range: Sendable, Equatable {
        public let low: Int
        public let high: Int
        /// A bare authority: host, optionally `:port`.
        public let host: String

        public init(low: Int, high: Int, host: String) {
            self.low = low
            self.high = high
            self.host = host
        }
    }

    public enum Invalid: Error, Equatable, CustomStringConvertible {
        case notJSON
        case badVersion
        case noRanges
        case badRange(Int)
        case badHost(Int)
        case notTiling

        public var description: String {
            switch self {
            case .notJSON: "not a JSON object with an integer version and a ranges array"
            case .badVersion: "version must be an integer ≥ 0"
            case .noRanges: "at least one range is needed"
            case let .badRange(index): "range \(index): low and high must be integers with 0 ≤ low ≤ high ≤ 65535"
            case let .badHost(index): "range \(index): host must be a bare lowercase authority (no /, @, ?, #, whitespace, uppercase or trailing dot)"
            case .notTiling: "the ranges, sorted by low, must tile 0…65535 exactly (no gap, no overlap)"
            }
        }
    }

    /// Every change must raise it: clients ignore a map whose version is not above the one held.
    public let version: Int
    /// Sorted by `low`; they tile 0…65535.
    public let ranges: [Range]

    public init(version: Int, ranges: [Range]) throws(Invalid) {
        guard version >= 0 else { throw .badVersion }
        guard !ranges.isEmpty else { throw .noRanges }
        for (index, range) in ranges.enumerated() {
            guard 0 <= range.low, range.low <= range.high, range.high < RoomName.bucketCount else { throw .badRange(index) }
            guard Self.isBareAuthority(range.host) else { throw .badHost(index) }
        }
        let sorted = ranges.sorted { $0.low < $1.low }
        var next = 0
        for range in sorted {
            guard range.low == next else { throw .notTiling }
            next = range.high + 1
        }
        guard next == RoomName.bucketCount else { throw .notTiling }
        self.version = version
        self.ranges = sorted
    }

    /// A map in which `host` owns every bucket.
    public static func single(host: String, version: Int = 1) throws(Invalid) -> ShardMap {
        try ShardMap(version: version, ranges: [Range(low: 0, high: RoomName.bucketCount - 1, host: host)])
    }

    /// Parses the document a resolver serves. Numbers must be integral (`1.0` is the integer 1,
    /// as in JavaScript and Swift's JSONDecoder); unknown members are ignored.
    public init(json bytes: [UInt8]) throws(Invalid) {
        guard case let .object(fields)? = JSONValue.parse(bytes),
              case let .number(versionNumber)? = fields["version"],
              case let .array(items)? = fields["ranges"] else { throw .notJSON }
        guard let version = Self.integer(versionNumber) else { throw .badVersion }
        var ranges: [Range] = []
        for (index, item) in items.enumerated() {
            guard case let .object(range) = item,
                  case let .number(low)? = range["low"], case let .number(high)? = range["high"],
                  let low = Self.integer(low), let high = Self.integer(high) else { throw .badRange(index) }
            guard case let .string(host)? = range["host"] else { throw .badHost(index) }
            ranges.append(Range(low: low, high: high, host: host))
        }
        try self.init(version: version, ranges: ranges)
    }

    /// The compact JSON document (members in the order of relay.md's example).
    public var json: String {
        let body = ranges.map { "{\"low\":\($0.low),\"high\":\($0.high),\"host\":\"\($0.host)\"}" }.joined(separator: ",")
        // Hosts need no escaping: a valid host has no quote, backslash or control character.
        return "{\"version\":\(version),\"ranges\":[\(body)]}"
    }

    /// The host owning `bucket` (0…65535).
    public func owner(of bucket: Int) -> String {
        var low = 0, high = ranges.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if ranges[middle].low <= bucket { low = middle } else { high = middle - 1 }
        }
        return ranges[low].host
    }

    public func owner(of room: RoomName) -> String { owner(of: room.bucket) }

    /// Every host named in the map, in range order, without repeats.
    public var hosts: [String] {
        var seen: Set<String> = []
        return ranges.compactMap { seen.insert($0.host).inserted ? $0.host : nil }
    }

    /// The client's host rule (relay.md §8.2): non-empty; no `/`, `@`, `?`, `#`, whitespace,
    /// uppercase letter or trailing dot. Control characters, quotes and backslashes are refused
    /// too: no client could connect to such a host, and the JSON above is written unescaped.
    public static func isBareAuthority(_ host: String) -> Bool {
        guard !host.isEmpty, !host.hasSuffix(".") else { return false }
        for scalar in host.unicodeScalars {
            if "/@?#\"\\".unicodeScalars.contains(scalar) { return false }
            if scalar.properties.isWhitespace || scalar.properties.isUppercase || scalar.value < 0x20 || scalar.value == 0x7F { return false }
        }
        return true
    }

    private static func integer(_ number: Double) -> Int? {
        guard number.isFinite, number.rounded() == number, abs(number) <= 9_007_199_254_740_991 else { return nil }
        return Int(number)
    }
}
