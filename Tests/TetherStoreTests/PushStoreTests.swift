import CSQLite
import Foundation
@testable import TetherStore
import TetherStoreContract
import XCTest

final class InMemoryPushStoreTests: XCTestCase {
    func testThePushStoreContract() throws { try PushStoreContract.verify { InMemoryPushStore() } }

    func testAnInjectedFailureIsThrownByEveryCallAndChangesNothing() throws {
        let store = InMemoryPushStore()
        let registration = MyttyRegistration(deviceToken: String(repeating: "a", count: 64), environment: .production, relaySecret: "S")
        try store.putMytty(registration, pushID: "p", expiresAt: 100)
        let full = StoreError("disk full")
        store.setFailure(full)
        XCTAssertThrowsError(try store.putMytty(registration, pushID: "q", expiresAt: 100)) { XCTAssertEqual($0 as? StoreError, full) }
        XCTAssertThrowsError(try store.putITerm(ITermRegistration(secretHash: "h", sandbox: false, registeredAt: 1), token: "t", expiresAt: 100))
        XCTAssertThrowsError(try store.mytty(pushID: "p", now: 0))
        XCTAssertThrowsError(try store.iterm(token: "t", now: 0))
        XCTAssertThrowsError(try store.renewMytty(pushID: "p", expiresAt: 500, now: 0))
        XCTAssertThrowsError(try store.deleteMytty(pushID: "p"))
        XCTAssertThrowsError(try store.deleteITerm(token: "t"))
        XCTAssertThrowsError(try store.pruneExpired(now: 1_000))
        XCTAssertThrowsError(try store.deviceCount(now: 0))
        store.setFailure(nil)
        XCTAssertEqual(try store.mytty(pushID: "p", now: 99), registration, "neither renewed, deleted nor pruned")
        XCTAssertNil(try store.mytty(pushID: "p", now: 100))
        XCTAssertNil(try store.mytty(pushID: "q", now: 0))
        XCTAssertNil(try store.iterm(token: "t", now: 0))
    }
}

final class SQLitePushStoreTests: XCTestCase {
    private var directory: URL!
    private var counter = 0

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-push-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    private var path: String { directory.appendingPathComponent("push.db").path }

    private func makeStore() throws -> SQLitePushStore { try SQLitePushStore(path: path) }

    private let registration = MyttyRegistration(deviceToken: String(repeating: "5e", count: 32), environment: .sandbox,
                                                 relaySecret: "tYq0HSFh8JcyZUQcQmHh7dpcu7vZRm9MONrrBqR2xSk=")
    private let itermRegistration = ITermRegistration(secretHash: String(repeating: "7c", count: 32), sandbox: true,
                                                      registeredAt: 1_722_000_000_000)

    func testThePushStoreContract() throws {
        try PushStoreContract.verify {
            counter += 1
            return try SQLitePushStore(path: directory.appendingPathComponent("contract-\(counter).db").path)
        }
    }

    func testThePushStoreContractInMemory() throws {
        try PushStoreContract.verify { try SQLitePushStore(path: ":memory:") }
    }

    func testRegistrationsSurviveReopening() throws {
        do {
            let store = try makeStore()
            try store.putMytty(registration, pushID: "p", expiresAt: 5_000)
            try store.putITerm(itermRegistration, token: "t", expiresAt: 6_000)
            XCTAssertTrue(try store.renewMytty(pushID: "p", expiresAt: 7_000, now: 1))
        }
        let reopened = try makeStore()
        XCTAssertEqual(try reopened.mytty(pushID: "p", now: 6_999), registration, "with its renewed expiry")
        XCTAssertEqual(try reopened.iterm(token: "t", now: 5_999), itermRegistration)
        XCTAssertEqual(try reopened.deviceCount(now: 0), 2)
    }

    func testARegisteredAtBeyondSignedSixtyFourBitsStillRoundTrips() throws {
        let store = try makeStore()
        for registeredAt in [UInt64.max, UInt64(Int64.max) + 1] {
            let record = ITermRegistration(secretHash: "h", sandbox: false, registeredAt: registeredAt)
            try store.putITerm(record, token: "t", expiresAt: 10)
            XCTAssertEqual(try store.iterm(token: "t", now: 0), record)
        }
    }

    func testAFullDatabaseMakesWritesThrowAndLosesNothingStored() throws {
        var stored: [String] = []
        var refused: String?
        do {
            let store = try makeStore()
            try store.putMytty(registration, pushID: "before", expiresAt: 5_000)
            try store.putITerm(itermRegistration, token: "before", expiresAt: 5_000)
            try store.capSizeAtCurrentPages()
            for index in 0..<10_000 {
                let pushID = "push-id-\(index)"
                do {
                    try store.putMytty(registration, pushID: pushID, expiresAt: 5_000)
                    stored.append(pushID)
                } catch {
                    XCTAssertTrue(error.message.contains("full"), error.message)
                    for secret in [pushID, registration.deviceToken, registration.relaySecret] {
                        XCTAssertFalse(error.message.contains(secret), "the message names no registration")
                    }
                    refused = pushID
                    break
                }
            }
            guard let refused else { return XCTFail("the capped database never filled") }
            XCTAssertNil(try store.mytty(pushID: refused, now: 0), "the refused write did not happen")
            XCTAssertEqual(try store.mytty(pushID: "before", now: 0), registration, "reads still work")
            XCTAssertEqual(try store.deviceCount(now: 0), stored.count + 2)
        }
        let reopened = try makeStore()
        XCTAssertEqual(try reopened.mytty(pushID: "before", now: 0), registration)
        XCTAssertEqual(try reopened.iterm(token: "before", now: 0), itermRegistration)
        for pushID in stored { XCTAssertEqual(try reopened.mytty(pushID: pushID, now: 0), registration, pushID) }
        XCTAssertNil(try reopened.mytty(pushID: refused ?? "", now: 0))
        try reopened.putMytty(registration, pushID: "after", expiresAt: 5_000)
        XCTAssertNotNil(try reopened.mytty(pushID: "after", now: 0), "without the cap the file grows again")
    }

    func testADatabaseLockedByAnotherWriterMakesWritesThrowOnceTheWaitIsOver() throws {
        let store = try SQLitePushStore(path: path, busyTimeoutMilliseconds: 50)
        try store.putMytty(registration, pushID: "p", expiresAt: 5_000)
        let other = try RawDatabase(path: path)
        try other.execute("BEGIN IMMEDIATE")
        XCTAssertThrowsError(try store.renewMytty(pushID: "p", expiresAt: 9_000, now: 0)) { error in
            XCTAssertTrue((error as? StoreError)?.message.contains("locked") == true, "\(error)")
        }
        XCTAssertThrowsError(try store.deleteMytty(pushID: "p"))
        XCTAssertThrowsError(try store.pruneExpired(now: 10_000))
        XCTAssertEqual(try store.mytty(pushID: "p", now: 0), registration, "WAL readers are not blocked by the writer")
        try other.execute("ROLLBACK")
        XCTAssertNil(try store.mytty(pushID: "p", now: 5_000), "the refused renewal did not happen")
        XCTAssertTrue(try store.renewMytty(pushID: "p", expiresAt: 9_000, now: 0))
        XCTAssertEqual(try store.pruneExpired(now: 9_000), 1)
    }

    func testAFileThatIsNotADatabaseIsRefusedAtOpen() throws {
        try Data(repeating: 0x41, count: 4_096).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try makeStore()) { error in
            guard case let .open(message) = error as? SQLitePushStore.Failure else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("not a database"), message)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(repeating: 0x41, count: 4_096), "and left as it was")
    }

    func testAnUnopenablePathIsRefused() {
        XCTAssertThrowsError(try SQLitePushStore(path: directory.appendingPathComponent("missing/push.db").path)) { error in
            XCTAssertTrue("\(error)".hasPrefix("cannot open the push database"), "\(error)")
        }
    }

    /// PUSH_DB pointed at the room relay's database (or any other) must not be written into.
    func testAnotherApplicationsDatabaseIsRefusedUntouched() throws {
        _ = try SQLiteRoomStore(path: path)
        XCTAssertThrowsError(try makeStore()) { XCTAssertEqual($0 as? SQLitePushStore.Failure, .schema("the file is a database, but not a push registration store")) }
        let raw = try RawDatabase(path: path)
        XCTAssertEqual(try raw.strings("SELECT name FROM sqlite_master WHERE name LIKE '%registrations%'"), [])
    }

    func testADatabaseFromANewerSchemaIsRefused() throws {
        _ = try makeStore()
        try RawDatabase(path: path).execute("PRAGMA user_version = 2")
        XCTAssertThrowsError(try makeStore()) { error in
            guard case let .schema(message) = error as? SQLitePushStore.Failure else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("version 2"), message)
        }
    }

    /// A record this store could not have written is damage: reading it as absent would let the
    /// push answer "unauthorized" and a re-registration paper over it.
    func testAStoredEnvironmentThisBuildDoesNotKnowIsAnErrorNotAnAbsence() throws {
        let store = try makeStore()
        try store.putMytty(registration, pushID: "p", expiresAt: 5_000)
        try RawDatabase(path: path).execute("UPDATE mytty_registrations SET environment = 'staging'")
        XCTAssertThrowsError(try store.mytty(pushID: "p", now: 0)) { error in
            XCTAssertEqual((error as? StoreError)?.message, "push database: read a Profile M registration failed: unknown environment stored")
        }
    }

    /// push.md §6: the registration and its key, nothing else — no IP, no macID, no ciphertext.
    func testTheSchemaHoldsOnlyTheRegistrationColumns() throws {
        _ = try makeStore()
        let raw = try RawDatabase(path: path)
        XCTAssertEqual(try raw.strings("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"),
                       ["iterm_registrations", "mytty_registrations"])
        XCTAssertEqual(try raw.strings("SELECT name FROM pragma_table_info('mytty_registrations') ORDER BY cid"),
                       ["push_id", "device_token", "environment", "relay_secret", "expires_at"])
        XCTAssertEqual(try raw.strings("SELECT name FROM pragma_table_info('iterm_registrations') ORDER BY cid"),
                       ["token", "secret_hash", "sandbox", "registered_at", "expires_at"])
        XCTAssertEqual(try raw.strings("SELECT il.name || ':' || ii.name FROM pragma_index_list('mytty_registrations') il, pragma_index_info(il.name) ii WHERE il.origin = 'c'"),
                       ["mytty_registrations_expiry:expires_at"])
        XCTAssertEqual(try raw.strings("SELECT il.name || ':' || ii.name FROM pragma_index_list('iterm_registrations') il, pragma_index_info(il.name) ii WHERE il.origin = 'c'"),
                       ["iterm_registrations_expiry:expires_at"])
        XCTAssertEqual(try raw.strings("PRAGMA user_version"), ["1"])
        XCTAssertEqual(try raw.strings("PRAGMA journal_mode"), ["wal"])
    }

    /// secure_delete: a deleted or pruned registration leaves no token or secret in the file.
    func testDeletedAndPrunedRegistrationsLeaveNoSecretBehindInTheFile() throws {
        let pruned = MyttyRegistration(deviceToken: String(repeating: "d1", count: 32), environment: .production,
                                       relaySecret: "PRUNEDsecretPRUNEDsecretPRUNEDsecretPRUNED0=")
        do {
            let store = try makeStore()
            try store.putMytty(registration, pushID: "deleted-push-id-0001", expiresAt: 5_000)
            try store.putMytty(pruned, pushID: "pruned-push-id-0002", expiresAt: 10)
            try store.putITerm(itermRegistration, token: "deletedtoken0003", expiresAt: 5_000)
            try store.putMytty(mytty("kept"), pushID: "kept-push-id-0004", expiresAt: 5_000)
        }
        XCTAssertTrue(fileBytes().contains(Array(registration.relaySecret.utf8)), "the probe sees what is stored")
        do {
            let store = try makeStore()
            try store.deleteMytty(pushID: "deleted-push-id-0001")
            try store.deleteITerm(token: "deletedtoken0003")
            XCTAssertEqual(try store.pruneExpired(now: 10), 1)
        }
        let bytes = fileBytes()
        for secret in [registration.relaySecret, registration.deviceToken, "deleted-push-id-0001", pruned.relaySecret, pruned.deviceToken,
                       "pruned-push-id-0002", itermRegistration.secretHash, "deletedtoken0003"] {
            XCTAssertFalse(bytes.contains(Array(secret.utf8)), "\(secret) is still in the file")
        }
        XCTAssertTrue(bytes.contains(Array("kept-push-id-0004".utf8)))
    }

    private func mytty(_ tag: String) -> MyttyRegistration {
        MyttyRegistration(deviceToken: String(repeating: "0b", count: 32), environment: .production, relaySecret: "kept-\(tag)")
    }

    private func fileBytes() -> [UInt8] {
        ["push.db", "push.db-wal"].flatMap { (try? Data(contentsOf: directory.appendingPathComponent($0))).map(Array.init) ?? [] }
    }
}

/// A second connection to the same file, as another process (or an operator's sqlite3) would hold.
private final class RawDatabase {
    struct Failure: Error { let message: String }
    private var db: OpaquePointer?

    init(path: String) throws {
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw Failure(message: String(cString: sqlite3_errmsg(db))) }
    }

    deinit { sqlite3_close(db) }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw Failure(message: String(cString: sqlite3_errmsg(db))) }
    }

    /// The first column of every row, as text.
    func strings(_ sql: String) throws -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw Failure(message: String(cString: sqlite3_errmsg(db))) }
        defer { sqlite3_finalize(statement) }
        var rows: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            rows.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
        }
        return rows
    }
}
