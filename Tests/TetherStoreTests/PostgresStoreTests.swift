import Dispatch
import Foundation
import TetherStore
import TetherStoreContract
import TetherTestSupport
import TetherWire
import XCTest

/// The PostgreSQL backends against a real server of the test's own (`PostgresServer`): the same
/// contract suites as SQLite and the in-memory double, unchanged, plus what only a networked,
/// shared database shows — two nodes racing, rows keyed without room names, a server that goes
/// away and comes back, and the schema's migrations.
final class PostgresStoreTests: XCTestCase {
    nonisolated(unsafe) private static var server: PostgresServer?

    override class func setUp() {
        server = try? PostgresServer()
    }

    override class func tearDown() {
        server?.shutdown()
        server = nil
    }

    private func database() throws -> (server: PostgresServer, url: String) {
        guard let server = Self.server else { throw XCTSkip("no PostgreSQL server could be started (scripts/install-deps)") }
        return (server, try server.createDatabase())
    }

    private static func pool(_ url: String, size: Int = 3, callTimeoutMs: Int = 2_000) throws -> PostgresPool {
        try PostgresPool(PostgresPool.Settings(url: url, size: size, callTimeoutMs: callTimeoutMs))
    }

    func testTheRoomStoreContract() throws {
        try RoomStoreContract.verify { try PostgresRoomStore(pool: Self.pool(database().url, size: 17)) }
    }

    func testThePushStoreContract() throws {
        try PushStoreContract.verify { try PostgresPushStore(pool: Self.pool(database().url, size: 17)) }
    }

    /// Two nodes with their own pools on one database: a verifier, a ticket and a map version each
    /// have one winner, and what one node wrote the other reads at once.
    func testTwoNodesOnOneDatabaseShareRecordsAndRaceWithOneWinner() throws {
        let url = try database().url
        let first = try PostgresRoomStore(pool: Self.pool(url)), second = try PostgresRoomStore(pool: Self.pool(url))
        let room = RoomKey(RoomName(header: String(repeating: "a", count: 64))!)
        try first.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        let wins = Tally()
        DispatchQueue.concurrentPerform(iterations: 8) { racer in
            let store = racer % 2 == 0 ? first : second
            if (try? store.consumeTicket("t", in: room, now: 50)) != nil { wins.add("ticket") }
            if (try? store.setVerifier("V\(racer)", of: room, now: 1)) == true { wins.add("verifier") }
            if (try? store.publishShardMap(ShardMap.single(host: "n\(racer).example", version: 3))) == true { wins.add("map") }
        }
        XCTAssertEqual(wins.counts, ["ticket": 1, "verifier": 1, "map": 1])
        XCTAssertEqual(try first.verifier(of: room), try second.verifier(of: room))
        XCTAssertEqual(try first.shardMap(), try second.shardMap())
    }

    func testTheDatabaseHoldsRoomKeysNeverRoomNames() throws {
        let (server, url) = try database()
        let store = try PostgresRoomStore(pool: Self.pool(url))
        let room = RoomName(header: "611c035897cf71eebc08e531616a3470f666cd001532e1bd4957dd762efae220")!
        try store.setPairingCycles(1, of: room)
        try store.putChallenge("c", expiresAt: 10, in: room)
        try store.setVerifier("V", of: room, now: 1)
        let database = String(url.split(separator: "/").last!)
        let rows = try server.query("SELECT room, bucket FROM relay_rooms UNION ALL SELECT room, 0 FROM relay_ephemeral", database: database)
        XCTAssertFalse(rows.contains(room.hex), "the name is the rendezvous secret")
        XCTAssertEqual(rows, "\(RoomKey(room).hex)|57888\n\(RoomKey(room).hex)|0")
    }

    /// A Proof's storage step is one statement: one round trip, counted by the server itself.
    func testAnAdmissionReadIsOneStatement() throws {
        let (server, url) = try database()
        let store = try PostgresRoomStore(pool: Self.pool(url, size: 1))
        let room = RoomKey(RoomName(header: String(repeating: "b", count: 64))!)
        try store.setVerifier("V", of: room, now: 1)
        try store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        let database = String(url.split(separator: "/").last!)
        _ = try server.query("SELECT pg_stat_reset()", database: database)
        for _ in 0..<10 {
            let read = try store.admission(AdmissionQuery(ticket: "t", now: 50), of: room)
            XCTAssertEqual(read.state.verifier, "V")
            XCTAssertNil(read.ticket, "an established room leaves the ticket alone")
        }
        XCTAssertNotNil(try store.consumeTicket("t", in: room, now: 50), "still there")
        // Statements the store's connection ran: 10 admissions and the one consume.
        // The statistics arrive with a delay (a backend reports at most once a second): wait
        // until the 11 are counted, so the bound is checked against the settled figure.
        let calls = try eventuallyValue("the store's transactions in pg_stat_database", within: 5, poll: 0.05) { () throws -> Int? in
            let text = try server.query("SELECT xact_commit FROM pg_stat_database WHERE datname = '\(database)'", database: database)
            return Int(text).flatMap { $0 >= 11 ? $0 : nil }
        }
        XCTAssertLessThanOrEqual(calls ?? .max, 11 + 2, "one transaction per admission (and psql's own)")
    }

    /// The server goes away: calls fail with an error (never "absent"), quickly, and the store
    /// answers again by itself once the server is back — nothing stored is lost.
    func testAServerThatGoesAwayFailsCallsQuicklyAndTheStoreRecoversByItself() throws {
        let (server, url) = try database()
        let store = try PostgresRoomStore(pool: Self.pool(url, size: 2))
        let room = RoomKey(RoomName(header: String(repeating: "c", count: 64))!)
        try store.setVerifier("V", of: room, now: 1)

        try server.stop()
        XCTAssertThrowsError(try store.verifier(of: room)) { XCTAssertTrue(($0 as? StoreError)?.message.hasPrefix("database: ") == true, "\($0)") }
        let started = Date()
        for _ in 0..<50 { XCTAssertThrowsError(try store.verifier(of: room)) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "calls in the back-off fail at once, not after a connect timeout each")
        XCTAssertTrue(store.pool.isBackingOff)

        try server.start()
        let answer = eventuallyValue("the store answers again", within: 10, poll: 0.05) { try? store.verifier(of: room) }
        XCTAssertEqual(answer, "V", "back without a restart, and nothing lost")
        XCTAssertFalse(store.pool.isBackingOff)
    }

    /// The server hangs (stopped, not down: the kernel still accepts and acknowledges): a call
    /// fails within the node's own deadline, never as long as the hang; the calls after it fail
    /// at once; a call that must connect anew is bounded too; and the store answers again by
    /// itself once the server resumes, with nothing lost.
    func testAHungServerFailsCallsWithinTheNodesDeadlineAndTheStoreRecoversWhenItResumes() throws {
        let (server, url) = try database()
        let store = try PostgresRoomStore(pool: Self.pool(url, size: 2, callTimeoutMs: 500))
        let room = RoomKey(RoomName(header: String(repeating: "d", count: 64))!)
        try store.setVerifier("V", of: room, now: 1)

        try server.pause()
        defer { try? server.resume() }
        var started = Date()
        XCTAssertThrowsError(try store.verifier(of: room)) {
            XCTAssertTrue(($0 as? StoreError)?.message.contains("no answer") == true, "\($0)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5, "bounded by the 500 ms deadline, not by the hang")
        XCTAssertTrue(store.pool.isBackingOff)
        started = Date()
        for _ in 0..<50 { XCTAssertThrowsError(try store.verifier(of: room)) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "calls in the stall back-off fail at once")
        // Past the back-off, every call that tries again is bounded by its deadline.
        usleep(300_000)   // must be a sleep: the pool shows nothing of when its back-off ends
        started = Date()
        for _ in 0..<3 { XCTAssertThrowsError(try store.touch(room, at: 2)) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2.5)

        try server.resume()
        let resumed = Date()
        let answer = eventuallyValue("the store answers again", within: 15, poll: 0.05) { try? store.verifier(of: room) }
        XCTAssertEqual(answer, "V", "back without a restart, and nothing lost")
        XCTAssertLessThan(Date().timeIntervalSince(resumed), 6, "within the longest back-off of the resume")
        XCTAssertFalse(store.pool.isBackingOff)
    }

    /// A server restart closes every idle connection; the pool notices when it hands one out, so
    /// the first call afterwards is answered instead of failing on a dead connection.
    func testTheFirstCallAfterAServerRestartIsAnswered() throws {
        let (server, url) = try database()
        let store = try PostgresPushStore(pool: Self.pool(url, size: 2))
        XCTAssertEqual(try store.deviceCount(now: 1), 0)
        try server.stop()
        try server.start()
        XCTAssertEqual(try store.deviceCount(now: 1), 0, "the first call after the restart")
        XCTAssertFalse(store.pool.isBackingOff)
    }

    func testMigrationsAreListedAppliedOnceAndLeftAloneByConcurrentNodes() throws {
        let url = try database().url
        let tool = try Self.pool(url, size: 1)
        XCTAssertEqual(try PostgresSchema.pending(.relay, pool: tool).map(\.version), [1, 2, 3])
        XCTAssertEqual(try PostgresSchema.pending(.push, pool: tool).map(\.version), [1, 2])
        let applied = Tally()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            guard let nodePool = try? Self.pool(url, size: 1), let steps = try? PostgresSchema.migrate(.relay, pool: nodePool) else {
                return applied.add("failed")
            }
            applied.add("\(steps.count) steps")
        }
        XCTAssertEqual(applied.counts, ["3 steps": 1, "0 steps": 3], "one node migrates; the others find nothing to do")
        XCTAssertEqual(try PostgresSchema.pending(.relay, pool: tool), [])
        XCTAssertEqual(try PostgresSchema.pending(.push, pool: tool).count, 2, "components migrate separately")
    }

    /// Leases on the database's clock: a node that stops renewing while the others renew loses
    /// its buckets to the live ones as soon as its lease lapses, in one round published once; a
    /// node that never held a lease is left alone.
    func testALapsedLeaseMovesItsBucketsToTheLiveNodesExactlyOnce() throws {
        let url = try database().url
        let nodes = try (0..<3).map { _ in try PostgresRoomStore(pool: Self.pool(url)) }
        let map = try XCTUnwrap(ShardPlan.even(hosts: ["a.test", "b.test", "c.test", "never.test"], version: 1))
        XCTAssertTrue(try nodes[0].publishShardMap(map))
        let rules = LeaseRules(ttlMs: 1_000, reconnectGraceMs: 0)
        try renew(nodes, ["a.test", "b.test", "c.test"], rules)
        XCTAssertNil(try nodes[0].leaseRound(host: "a.test", rules: rules), "every lease is live: nothing to do")
        // a and b keep renewing; c stops. Must be sleeps: renewing every 200 ms past c's 1 s
        // lease, on the database's clock, is the scenario.
        for _ in 0..<6 {
            usleep(200_000)
            try renew(nodes, ["a.test", "b.test"], rules)
        }
        XCTAssertEqual(try nodes[1].liveHosts(), ["a.test", "b.test"])

        let rounds = Tally()
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            if let round = try? nodes[index].leaseRound(host: ["a.test", "b.test"][index], rules: rules) {
                rounds.add("v\(round.map.version) \(round.change)")
            }
        }
        XCTAssertEqual(rounds.counts, ["v2 failover(lapsed: [\"c.test\"])": 1], "one node is elected and publishes")
        let next = try XCTUnwrap(try nodes[0].shardMap())
        XCTAssertEqual(next.version, 2)
        XCTAssertFalse(next.hosts.contains("c.test"))
        XCTAssertTrue(next.hosts.contains("never.test"), "a node that never held a lease is the operator's to place")
        XCTAssertNil(try nodes[1].leaseRound(host: "b.test", rules: rules), "the dead node owns nothing now")
    }

    /// A database that hangs for longer than the lease lapses every lease by its own clock. When it
    /// answers again — its connections resuming a few milliseconds apart — the first node answered
    /// must not take the buckets of nodes that are alive and merely not answered yet: its own
    /// continuity broke with the hang, so it may not act until every live node has renewed.
    func testAHangThatLapsesEveryLeaseMovesNoBucketWhenTheDatabaseResumes() throws {
        let url = try database().url
        let nodes = try (0..<3).map { _ in try PostgresRoomStore(pool: Self.pool(url)) }
        let hosts = ["a.test", "b.test", "c.test"]
        let map = try XCTUnwrap(ShardPlan.even(hosts: hosts, version: 1))
        XCTAssertTrue(try nodes[0].publishShardMap(map))
        let rules = LeaseRules(ttlMs: 1_000, reconnectGraceMs: 500)
        for _ in 0..<4 {
            try renew(nodes, hosts, rules)
            usleep(200_000)   // must be a sleep: renewals 200 ms apart on the database's clock are the scenario
        }
        usleep(1_300_000)   // must be a sleep: the hang, nobody renewing for longer than the lease
        for (index, host) in hosts.enumerated() {
            try nodes[index].renewLease(host: host, rules: rules)
            for (other, otherHost) in hosts.enumerated() {
                XCTAssertNil(try nodes[other].leaseRound(host: otherHost, rules: rules), "\(otherHost) acts after \(host) resumed")
            }
            usleep(20_000)   // must be a sleep: connections resuming a few milliseconds apart
        }
        XCTAssertEqual(try nodes[0].shardMap()?.version, 1, "no bucket moved")
    }

    /// A node that lost its buckets (a stall longer than the lease) gets an even share back once
    /// it has renewed continuously for `restoreAfterMs` — not never, and not at its first renewal.
    func testANodeThatLostItsBucketsGetsAnEvenShareBackAfterRenewingLongEnough() throws {
        let url = try database().url
        let nodes = try (0..<3).map { _ in try PostgresRoomStore(pool: Self.pool(url)) }
        let hosts = ["a.test", "b.test", "c.test"]
        XCTAssertTrue(try nodes[0].publishShardMap(XCTUnwrap(ShardPlan.even(hosts: hosts, version: 1))))
        let rules = LeaseRules(ttlMs: 1_000, reconnectGraceMs: 0)
        try renew(nodes, hosts, rules)
        for _ in 0..<6 {
            usleep(200_000)   // must be a sleep: a and b renewing past c's 1 s lease is the scenario
            try renew(nodes, ["a.test", "b.test"], rules)
        }
        XCTAssertEqual(try nodes[0].leaseRound(host: "a.test", rules: rules)?.change, .failover(lapsed: ["c.test"]))

        // c comes back: it owns nothing at first, and gets its share after 2 s of renewals.
        let back = Date()
        // Renewing every 200 ms (the cadence is the scenario) until a round gives c its share.
        let restored = try Eventually.poll(within: 5, every: 0.2) { () throws -> LeaseRound? in
            try renew(nodes, hosts, rules)
            return try nodes[0].leaseRound(host: "a.test", rules: rules)
        }.0
        let waited = Date().timeIntervalSince(back)
        let round = try XCTUnwrap(restored)
        XCTAssertEqual(round.change, .restored(["c.test"]))
        XCTAssertGreaterThanOrEqual(waited, Double(rules.restoreAfterMs) / 1000 - 0.3, "not at its first renewal")
        XCTAssertEqual(round.map.ranges.filter { $0.host == "c.test" }.reduce(0) { $0 + $1.high - $1.low + 1 }, 21845)
        XCTAssertEqual(try nodes[2].shardMap(), round.map)
        for _ in 0..<3 {
            try renew(nodes, hosts, rules)
            XCTAssertNil(try nodes[1].leaseRound(host: "b.test", rules: rules), "a share is given back once")
            usleep(200_000)   // must be a sleep: more renewal rounds, 200 ms apart, that must not restore again
        }
    }

    /// Every node hears of a map another node published within milliseconds of its commit (not at
    /// its next poll), once on connecting (to catch up), and again after the database restarts.
    func testAPublishedMapIsAnnouncedToEveryWatchingNode() throws {
        let (server, url) = try database()
        let watcher = try PostgresRoomStore(pool: Self.pool(url))
        let publisher = try PostgresRoomStore(pool: Self.pool(url))
        let heard = Tally()
        let watch = watcher.watchShardMap { heard.add("changed") }
        defer { watch.stop() }
        func waitFor(_ count: Int, within seconds: Double) -> TimeInterval? {
            let (heardThem, waited) = Eventually.poll(within: seconds, every: 0.005) { heard.counts["changed", default: 0] >= count ? true : nil }
            return heardThem == nil ? nil : waited
        }
        XCTAssertNotNil(waitFor(1, within: 5), "the catch-up call on connecting")
        XCTAssertTrue(try publisher.publishShardMap(XCTUnwrap(ShardPlan.even(hosts: ["a.test", "b.test"], version: 1))))
        let latency = try XCTUnwrap(waitFor(2, within: 2), "announced")
        XCTAssertLessThan(latency, 0.5, "at the commit, not at a poll")
        XCTAssertFalse(try publisher.publishShardMap(XCTUnwrap(ShardPlan.even(hosts: ["a.test"], version: 1))))
        usleep(300_000)   // must be a sleep: that nothing is announced is the check
        XCTAssertEqual(heard.counts["changed"], 2, "a refused publication announces nothing")

        try server.stop()
        try server.start()
        XCTAssertNotNil(waitFor(3, within: 10), "reconnected, and caught up once")
        XCTAssertTrue(try publisher.publishShardMap(XCTUnwrap(ShardPlan.even(hosts: ["a.test", "b.test"], version: 2))))
        XCTAssertNotNil(waitFor(4, within: 2), "announced after the restart")
    }

    /// Profile I's per-token limit is the cluster's, not each node's: pushes alternating between
    /// two nodes share one window (14 of 14 went through when each node counted its own).
    func testAPushWindowIsSharedByEveryNode() throws {
        let url = try database().url
        let nodes = try (0..<2).map { _ in try PostgresPushStore(pool: Self.pool(url)) }
        let outcomes = try (0..<14).map { try nodes[$0 % 2].hitSharedPushWindow(token: "t1", limit: 10, windowMs: 60_000) }
        XCTAssertEqual(outcomes.map { $0 == true }, Array(repeating: true, count: 10) + Array(repeating: false, count: 4))
        XCTAssertEqual(try nodes[1].hitSharedPushWindow(token: "t2", limit: 10, windowMs: 60_000), true, "per token")
        // A window that has run out starts again.
        XCTAssertEqual(try nodes[0].hitSharedPushWindow(token: "t3", limit: 1, windowMs: 200), true)
        XCTAssertEqual(try nodes[1].hitSharedPushWindow(token: "t3", limit: 1, windowMs: 200), false)
        usleep(300_000)   // must be a sleep: the 200 ms window runs out by the database's clock
        XCTAssertEqual(try nodes[1].hitSharedPushWindow(token: "t3", limit: 1, windowMs: 200), true)
        XCTAssertNil(try InMemoryPushStore().hitSharedPushWindow(token: "t1", limit: 10, windowMs: 60_000), "one node counts in memory")
    }

    private func renew(_ nodes: [PostgresRoomStore], _ hosts: [String], _ rules: LeaseRules) throws {
        for host in hosts {
            let index = ["a.test", "b.test", "c.test"].firstIndex(of: host)!
            try nodes[index].renewLease(host: host, rules: rules)
        }
    }

    func testAWrongURLIsReportedAtStartWithoutTheSecret() throws {
        let (server, _) = try database()
        let url = "postgres://tether:hunter2@127.0.0.1:\(server.port)/no_such_database"
        XCTAssertThrowsError(try Self.pool(url)) { error in
            let message = (error as? StoreError)?.message ?? ""
            XCTAssertTrue(message.hasPrefix("database: cannot connect: "), message)
            XCTAssertTrue(message.contains("no_such_database"), message)
            XCTAssertFalse(message.contains("hunter2"), "a password never reaches a log line")
        }
    }
}

private final class Tally: @unchecked Sendable {   // every access under `lock`
    private let lock = NSLock()
    private var tally: [String: Int] = [:]
    func add(_ kind: String) { lock.withLock { tally[kind, default: 0] += 1 } }
    var counts: [String: Int] { lock.withLock { tally } }
}
