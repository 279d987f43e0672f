import CSQLite
import Foundation
import TetherStore
import TetherStoreContract
import TetherCrypto
import TetherWire
import XCTest

final class InMemoryRoomStoreTests: XCTestCase {
    func testTheRoomStoreContract() throws { try RoomStoreContract.verify { InMemoryRoomStore() } }
}

final class SQLiteRoomStoreTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "d", count: 64))!
    private var counter = 0
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    func makeStore() throws -> any RoomStore { try SQLiteRoomStore(path: directory.appendingPathComponent("relay.db").path) }

    func testTheRoomStoreContract() throws {
        try RoomStoreContract.verify {
            counter += 1
            return try SQLiteRoomStore(path: directory.appendingPathComponent("contract-\(counter).db").path)
        }
    }

    func testAMapPublishedThroughOneConnectionIsSeenByAnotherAndARaceCannotLowerIt() throws {
        let node = try makeStore(), operatorTool = try makeStore()
        XCTAssertTrue(try operatorTool.publishShardMap(try ShardMap.single(host: "a.example", version: 5)))
        XCTAssertEqual(try node.shardMap()?.version, 5)
        XCTAssertFalse(try node.publishShardMap(try ShardMap.single(host: "b.example", version: 4)), "a node starting with an older RELAY_SHARD_MAP")
        XCTAssertEqual(try operatorTool.shardMap()?.hosts, ["a.example"])
    }

    private func fileBytes() -> [UInt8] {
        ["relay.db", "relay.db-wal"].flatMap { (try? Data(contentsOf: directory.appendingPathComponent($0))).map(Array.init) ?? [] }
    }

    func testTheDatabaseHoldsRoomKeysNeverRoomNames() throws {
        let room = RoomName(header: "611c035897cf71eebc08e531616a3470f666cd001532e1bd4957dd762efae220")!
        do {
            let store = try makeStore()
            try store.setPairingCycles(1, of: room)
            try store.putChallenge("c", expiresAt: 10, in: room)
            try store.putTicket("t", TicketRecord(expiresAt: 10, keyID: "k", publicKey: "p"), in: room)
            try store.setQuota(QuotaRecord(dayStart: 1, bytes: 2), of: room)
            try store.setVerifier("V", of: room, now: 1)
            XCTAssertEqual(try store.idleRooms(lastActivityBefore: 2, limit: 1), [RoomKey(room)])
            XCTAssertEqual(RoomKey(room).bucket, 57888)
            XCTAssertEqual(RoomKey(room).logTag, room.logTag)
            XCTAssertEqual(RoomKey(hex: RoomKey(room).hex, bucket: 57888), RoomKey(room), "read back from its stored form")
            XCTAssertEqual(RoomKey(room).bytes, SHA256.hash(room.transcriptField))
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
            XCTAssertEqual(try store.verifier(of: room), "V")
            XCTAssertEqual(try store.pairingCycles(of: room), 2)
            XCTAssertEqual(try store.liveChallenges(in: room, now: 0), 1)
            XCTAssertEqual(try store.idleRooms(lastActivityBefore: 2_000, limit: 5), [RoomKey(room)])
            XCTAssertEqual(try store.idleRooms(lastActivityBefore: 2_000, limit: 5).first?.bucket, 53374)
        }
        XCTAssertFalse(fileBytes().contains(Array(room.hex.utf8)), "no name stays behind")
        XCTAssertEqual(try makeStore().verifier(of: room), "V", "a second open does not rewrite again")
    }

    func testEstablishedRoomsSurviveReopening() throws {
        let room = RoomName(header: String(repeating: "f", count: 64))!
        do {
            let store = try makeStore()
            try store.setVerifier("V", of: room, now: 1)
            try store.setPairingCycles(2, of: room)
        }
        let reopened = try makeStore()
        XCTAssertEqual(try reopened.verifier(of: room), "V")
        XCTAssertEqual(try reopened.pairingCycles(of: room), 2)
    }

    func testAnUnopenableDatabaseIsAnError() {
        XCTAssertThrowsError(try SQLiteRoomStore(path: "/nonexistent-dir/relay.db"))
    }
}
