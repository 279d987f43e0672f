import CSQLite
import Foundation
import TetherRelay
import TetherWire
import XCTest

/// The same behaviour from every `RoomStore`: the in-memory double and SQLite.
class RoomStoreContract: XCTestCase {
    func makeStore() throws -> any RoomStore { InMemoryRoomStore() }
    private let room = RoomName(header: String(repeating: "d", count: 64))!
    private let other = RoomName(header: String(repeating: "e", count: 64))!

    func testVerifierCyclesActivityAndQuota() throws {
        let store = try makeStore()
        XCTAssertNil(store.verifier(of: room))
        XCTAssertEqual(store.pairingCycles(of: room), 0)
        store.setPairingCycles(3, of: room)
        XCTAssertEqual(store.pairingCycles(of: room), 3)
        store.setVerifier("V", of: room, now: 10)
        XCTAssertEqual(store.verifier(of: room), "V")
        XCTAssertNil(store.verifier(of: other))
        XCTAssertNil(store.quota(of: room))
        store.setQuota(QuotaRecord(dayStart: 5, bytes: 6), of: room)
        XCTAssertEqual(store.quota(of: room), QuotaRecord(dayStart: 5, bytes: 6))
        store.touch(room, at: 20)
        store.deleteRoom(room)
        XCTAssertNil(store.verifier(of: room))
        XCTAssertEqual(store.pairingCycles(of: room), 0)
        XCTAssertNil(store.quota(of: room))
    }

    func testHousekeepingPrunesExpiredRecordsEverywhereAndFindsIdleEstablishedRooms() throws {
        let store = try makeStore()
        store.putChallenge("c", expiresAt: 100, in: room)
        store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: other)
        store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 300), in: other)
        store.pruneExpired(now: 200)
        XCTAssertEqual(store.liveChallenges(in: room, now: 0), 0, "pruned even when read with an earlier clock")
        XCTAssertNil(store.consumeTicket("t", in: other, now: 0))
        XCTAssertNotNil(store.registrationToken("K", in: other, now: 0), "live records stay")

        XCTAssertEqual(store.idleRooms(lastActivityBefore: .max, limit: 10), [], "pairing rooms are never reaped")
        store.setVerifier("V", of: room, now: 1_000)
        store.setVerifier("W", of: other, now: 5_000)
        XCTAssertEqual(store.lastActivity(of: room), 1_000)
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 1_000, limit: 10), [])
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 1_001, limit: 10), [RoomKey(room)])
        XCTAssertEqual(Set(store.idleRooms(lastActivityBefore: 6_000, limit: 10)), [RoomKey(room), RoomKey(other)])
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 6_000, limit: 1).count, 1)
        store.touch(room, at: 7_000)
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 6_000, limit: 10), [RoomKey(other)])
        store.deleteRoom(other)
        XCTAssertNil(store.lastActivity(of: other))
    }

    func testRecordsHoldingNothingGoAndEndedQuotaWindowsArePruned() throws {
        let store = try makeStore()
        store.setPairingCycles(0, of: room)
        XCTAssertEqual(storedRooms(store), 0, "resetting a room never parked in writes nothing")
        store.setPairingCycles(2, of: room)
        XCTAssertEqual(storedRooms(store), 1)
        store.setPairingCycles(0, of: room)
        XCTAssertEqual(storedRooms(store), 0, "a record holding only a count goes with it")

        let day = QuotaRecord.window
        store.setQuota(QuotaRecord(dayStart: 10 * day, bytes: 5), of: room)
        store.setPairingCycles(1, of: other)
        store.setVerifier("V", of: other, now: 10 * day)
        XCTAssertEqual(store.pairingCycles(of: other), 0, "establishing drops the count")
        store.pruneExpired(now: 11 * day - 1)
        XCTAssertEqual(store.quota(of: room), QuotaRecord(dayStart: 10 * day, bytes: 5), "the window is still open")
        store.pruneExpired(now: 11 * day)
        XCTAssertNil(store.quota(of: room))
        XCTAssertEqual(storedRooms(store), 1, "only the established room remains")
        XCTAssertEqual(store.verifier(of: other), "V")
    }

    /// Room records the store holds (any kind).
    func storedRooms(_ store: any RoomStore) -> Int {
        (store as? InMemoryRoomStore)?.roomCount ?? (store as? SQLiteRoomStore)?.roomCount ?? -1
    }

    func testTheShardMapIsPublishedOnlyWithAHigherVersion() throws {
        let store = try makeStore()
        XCTAssertNil(store.shardMap())
        let first = try ShardMap.single(host: "a.example", version: 1)
        XCTAssertTrue(store.publishShardMap(first))
        XCTAssertEqual(store.shardMap(), first)
        XCTAssertFalse(store.publishShardMap(try ShardMap.single(host: "b.example", version: 1)), "versions only grow")
        XCTAssertFalse(store.publishShardMap(try ShardMap.single(host: "b.example", version: 0)))
        XCTAssertEqual(store.shardMap(), first)
        let second = try ShardMap(version: 2, ranges: [.init(low: 0, high: 9, host: "a.example"), .init(low: 10, high: 65535, host: "b.example")])
        XCTAssertTrue(store.publishShardMap(second))
        XCTAssertEqual(store.shardMap(), second)
    }

    func testEphemeralRecordsAreSingleUseAndExpire() throws {
        let store = try makeStore()
        store.putChallenge("c1", expiresAt: 100, in: room)
        store.putChallenge("c2", expiresAt: 50, in: room)
        XCTAssertEqual(store.liveChallenges(in: room, now: 60), 1, "expired ones are pruned")
        XCTAssertFalse(store.consumeChallenge("c1", in: other, now: 60), "per room")
        XCTAssertTrue(store.consumeChallenge("c1", in: room, now: 100))
        XCTAssertFalse(store.consumeChallenge("c1", in: room, now: 60), "single use")
        store.putChallenge("c3", expiresAt: 100, in: room)
        XCTAssertFalse(store.consumeChallenge("c3", in: room, now: 101), "expired")
        XCTAssertFalse(store.consumeChallenge("c3", in: room, now: 50), "and gone")

        store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        XCTAssertEqual(store.consumeTicket("t", in: room, now: 100), TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"))
        XCTAssertNil(store.consumeTicket("t", in: room, now: 0))

        store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 100, attestKeyID: "k", attestPublicKey: nil), in: room)
        XCTAssertEqual(store.registrationToken("K", in: room, now: 100)?.attestKeyID, "k")
        XCTAssertNil(store.registrationToken("K", in: room, now: 101))
        XCTAssertNotNil(store.registrationToken("K", in: room, now: 99), "reading does not consume")
        store.deleteRegistrationToken("K", in: room)
        XCTAssertNil(store.registrationToken("K", in: room, now: 0))

        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(room)))
        store.setAssertionCounter(7, for: "k", in: RoomKey(room))
        XCTAssertEqual(store.assertionCounter(for: "k", in: RoomKey(room)), 7)
        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(other)), "per room")
        store.deleteRoom(room)
        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(room)), "gone with the room")
    }
}

final class InMemoryRoomStoreTests: RoomStoreContract {}

final class SQLiteRoomStoreTests: RoomStoreContract {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    override func makeStore() throws -> any RoomStore { try SQLiteRoomStore(path: directory.appendingPathComponent("relay.db").path) }

    func testAMapPublishedThroughOneConnectionIsSeenByAnotherAndARaceCannotLowerIt() throws {
        let node = try makeStore(), operatorTool = try makeStore()
        XCTAssertTrue(operatorTool.publishShardMap(try ShardMap.single(host: "a.example", version: 5)))
        XCTAssertEqual(node.shardMap()?.version, 5)
        XCTAssertFalse(node.publishShardMap(try ShardMap.single(host: "b.example", version: 4)), "a node starting with an older RELAY_SHARD_MAP")
        XCTAssertEqual(operatorTool.shardMap()?.hosts, ["a.example"])
    }

    private func fileBytes() -> [UInt8] {
        ["relay.db", "relay.db-wal"].flatMap { (try? Data(contentsOf: directory.appendingPathComponent($0))).map(Array.init) ?? [] }
    }

    func testTheDatabaseHoldsRoomKeysNeverRoomNames() throws {
        let room = RoomName(header: "611c035897cf71eebc08e531616a3470f666cd001532e1bd4957dd762efae220")!
        do {
            let store = try makeStore()
            store.setPairingCycles(1, of: room)
            store.putChallenge("c", expiresAt: 10, in: room)
            store.putTicket("t", TicketRecord(expiresAt: 10, keyID: "k", publicKey: "p"), in: room)
            store.setQuota(QuotaRecord(dayStart: 1, bytes: 2), of: room)
            store.setVerifier("V", of: room, now: 1)
            XCTAssertEqual(store.idleRooms(lastActivityBefore: 2, limit: 1), [RoomKey(room)])
            XCTAssertEqual(RoomKey(room).bucket, 57888)
            XCTAssertEqual(RoomKey(room).logTag, room.logTag)
        }
        let bytes = fileBytes()
        XCTAssertFalse(bytes.contains(Array(room.hex.utf8)), "the name is the rendezvous secret")
        XCTAssertTrue(bytes.contains(Array(RoomKey(room).hex.utf8)))
    }

    func testADatabaseWrittenWithRoomNamesIsRewrittenToKeysOnOpenLosingNothing() throws {
        let room = RoomName(header: "de5613dbe578aeb70a6885a481e0252dbc4bb279bcb120235a38cda8a999d07e")!
        let path = directory.appendingPathComponent("relay.db").path
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        let legacy = """
            PRAGMA journal_mode=WAL;
            CREATE TABLE rooms (room TEXT PRIMARY KEY, verifier TEXT, pairing_cycles INTEGER NOT NULL DEFAULT 0,
                                last_activity INTEGER, quota_day_start INTEGER, quota_bytes INTEGER);
            CREATE TABLE ephemeral (room TEXT NOT NULL, kind TEXT NOT NULL, secret TEXT NOT NULL, expires_at INTEGER NOT NULL,
                                    key_id TEXT, public_key TEXT, PRIMARY KEY (room, kind, secret));
            INSERT INTO rooms VALUES ('\(room.hex)', 'V', 2, 1000, NULL, NULL);
            INSERT INTO ephemeral VALUES ('\(room.hex)', 'challenge', 'c', 99999, NULL, NULL);
            """
        XCTAssertEqual(sqlite3_exec(db, legacy, nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        do {
            let store = try makeStore()
            XCTAssertEqual(store.verifier(of: room), "V")
            XCTAssertEqual(store.pairingCycles(of: room), 2)
            XCTAssertEqual(store.liveChallenges(in: room, now: 0), 1)
            XCTAssertEqual(store.idleRooms(lastActivityBefore: 2_000, limit: 5), [RoomKey(room)])
            XCTAssertEqual(store.idleRooms(lastActivityBefore: 2_000, limit: 5).first?.bucket, 53374)
        }
        XCTAssertFalse(fileBytes().contains(Array(room.hex.utf8)), "no name stays behind")
        XCTAssertEqual(try makeStore().verifier(of: room), "V", "a second open does not rewrite again")
    }

    func testEstablishedRoomsSurviveReopening() throws {
        let room = RoomName(header: String(repeating: "f", count: 64))!
        do {
            let store = try makeStore()
            store.setVerifier("V", of: room, now: 1)
            store.setPairingCycles(2, of: room)
        }
        let reopened = try makeStore()
        XCTAssertEqual(reopened.verifier(of: room), "V")
        XCTAssertEqual(reopened.pairingCycles(of: room), 2)
    }

    func testAnUnopenableDatabaseIsAnError() {
        XCTAssertThrowsError(try SQLiteRoomStore(path: "/nonexistent-dir/relay.db"))
    }
}
