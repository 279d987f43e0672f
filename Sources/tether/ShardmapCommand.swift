import Foundation
import Glibc
import TetherRelay
import TetherService
import TetherStore
import TetherWire

/// `tether shardmap show|publish`: the operator's view of the shard map every node shares.
func runShardmapCommand(_ arguments: [String]) {
    var arguments = arguments
    let help = """
    usage: tether shardmap show [--config ENV-FILE] [--relay-db PATH-OR-URL]
           tether shardmap publish MAP.json [--config ENV-FILE] [--relay-db PATH-OR-URL]
           tether shardmap rebalance [--config ENV-FILE] [--relay-db URL]

    The shard map (resolver v2) lives in the relay database every node shares (RELAY_DB: a SQLite
    path or a postgres:// URL). `publish` validates MAP.json as clients do and stores it only if
    its version is above the stored one; running nodes adopt it within a second and close moved
    rooms with 4421 `reshard <owner>`. `rebalance` (PostgreSQL only: it reads the nodes' leases)
    deals every bucket evenly over the nodes alive now, one range each in host order — how a node
    that came back after a failover gets its share — and publishes that at the next version.

    """
    if arguments.isEmpty || arguments.contains("--help") || arguments.contains("-h") {
        print(help, terminator: "")
        exit(arguments.isEmpty ? 2 : 0)
    }
    let environment = operatorEnvironment(&arguments, command: "shardmap", flags: [("--relay-db", "RELAY_DB")])
    let (store, where_) = openOperatorRoomStore(environment, command: "shardmap")
    do throws(StoreError) {
        switch (arguments.first, arguments.count) {
        case ("show", 1):
            guard let map = try store.shardMap() else { fail("shardmap: no map published in \(where_) (each node owns every bucket)", code: 1) }
            print(map.json)
        case ("publish", 2):
            let map: ShardMap
            do throws(InvalidSettingValue) { _ = try SettingParser<String?>.readableFile.parse(arguments[1]) } catch {
                fail("shardmap: \(error.message)")
            }
            do { map = try RelayConfiguration.loadShardMap(arguments[1], variable: "shardmap") } catch { fail("\(error)", code: 1) }
            guard try store.publishShardMap(map) else {
                fail("shardmap: version \(map.version) not published: \(where_) holds version \(try store.shardMap()?.version ?? 0); every change must raise it", code: 1)
            }
            print("shardmap: published version \(map.version) to \(where_)")
        case ("rebalance", 1):
            guard let leases = store as? any NodeLeases else { fail("shardmap: rebalance needs a postgres:// RELAY_DB (node leases live there)", code: 1) }
            let live = try leases.liveHosts()
            let version = (try store.shardMap()?.version ?? 0) + 1
            guard let map = ShardPlan.even(hosts: live, version: version) else { fail("shardmap: no node holds a live lease in \(where_)", code: 1) }
            guard try store.publishShardMap(map) else { fail("shardmap: another publication raised the version meanwhile; run rebalance again", code: 1) }
            print("shardmap: published version \(map.version) to \(where_): \(live.count) node\(live.count == 1 ? "" : "s") (\(live.joined(separator: ", ")))")
            print(map.json)
        default:
            fail("shardmap: expected `show`, `publish MAP.json` or `rebalance` (see --help)")
        }
    } catch {
        fail("shardmap: \(error)", code: 1)
    }
    exit(0)
}

/// The environment an operator command reads (`--config`, then the process environment), with
/// each `flag VALUE` overriding its variable.
func operatorEnvironment(_ arguments: inout [String], command: String, flags: [(flag: String, variable: String)]) -> [String: String] {
    var environment = serviceEnvironment(&arguments, command: command)
    for (flag, variable) in flags {
        guard let index = arguments.firstIndex(of: flag) else { continue }
        guard index + 1 < arguments.count, !arguments[index + 1].isEmpty else { fail("\(command): \(flag) needs a path or a postgres:// URL") }
        environment[variable] = arguments[index + 1]
        arguments.removeSubrange(index...(index + 1))
    }
    return environment
}

/// The relay database an operator command works on, and how to name it. An operator command never
/// creates one: a mistyped path or an empty PostgreSQL database must not read as "published".
func openOperatorRoomStore(_ environment: [String: String], command: String) -> (any RoomStore, String) {
    let setting = environment["RELAY_DB"].flatMap { $0.isEmpty ? nil : $0 } ?? "relay.db"
    let location = StoreLocation(setting)
    do {
        switch location {
        case .memory:
            fail("\(command): RELAY_DB is :memory:, which no node shares")
        case let .sqlite(path):
            guard FileManager.default.fileExists(atPath: path) else {
                fail("\(command): no relay database at \(path) (RELAY_DB / --relay-db; a relay creates it on its first start)")
            }
            return (try SQLiteRoomStore(path: path), path)
        case let .postgres(url):
            let pool = try PostgresPool(PostgresPool.Settings(url: url, size: 1))
            guard try PostgresSchema.pending(.relay, pool: pool).isEmpty else {
                fail("\(command): no relay schema in \(location.display) (a relay creates it on its first start; `tether db migrate` shows the steps)", code: 1)
            }
            return (try PostgresRoomStore(pool: pool, migrating: false), location.display)
        }
    } catch {
        fail("\(command): RELAY_DB: \(error)", code: 1)
    }
}
