/// Where a service keeps its records, read from `RELAY_DB` / `PUSH_DB`: `:memory:`, a SQLite file
/// path (the default), or a `postgres://` (`postgresql://`) URL for a database several nodes share.
public enum StoreLocation: Sendable, Equatable {
    case memory
    case sqlite(path: String)
    case postgres(url: String)

    public init(_ setting: String) {
        if setting == ":memory:" {
            self = .memory
        } else if setting.hasPrefix("postgres://") || setting.hasPrefix("postgresql://") {
            self = .postgres(url: setting)
        } else {
            self = .sqlite(path: setting)
        }
    }

    /// What the start-up line shows: the path, or the URL without its user and password.
    public var display: String {
        switch self {
        case .memory: ":memory:"
        case let .sqlite(path): path
        case let .postgres(url): Self.redacted(url)
        }
    }

    /// `postgres://user:secret@host:5432/db?sslmode=require` → `postgres://host:5432/db`: the query
    /// can carry a password too, so it goes with the credentials.
    static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return "postgres" }
        let scheme = url[..<schemeEnd.lowerBound]
        var rest = url[schemeEnd.upperBound...]
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<authorityEnd].lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        return "\(scheme)://\(rest)"
    }

    /// Store lanes plus one connection for chores (housekeeping, the shard-map read).
    public static func poolSettings(url: String, lanes: Int) -> PostgresPool.Settings {
        PostgresPool.Settings(url: url, size: lanes + 1)
    }

    /// The relay's store here, its schema migrated.
    public func openRoomStore(lanes: Int = StoreExecutor<Int>.defaultLanes) throws -> any RoomStore {
        switch self {
        case .memory: InMemoryRoomStore()
        case let .sqlite(path): try SQLiteRoomStore(path: path)
        case let .postgres(url): try PostgresRoomStore(pool: PostgresPool(Self.poolSettings(url: url, lanes: lanes)))
        }
    }

    /// The push relay's store here, its schema migrated.
    public func openPushStore(lanes: Int = StoreExecutor<Int>.defaultLanes) throws -> any PushStore {
        switch self {
        case .memory: InMemoryPushStore()
        case let .sqlite(path): try SQLitePushStore(path: path)
        case let .postgres(url): try PostgresPushStore(pool: PostgresPool(Self.poolSettings(url: url, lanes: lanes)))
        }
    }
}
