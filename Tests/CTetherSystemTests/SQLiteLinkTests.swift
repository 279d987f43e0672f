import CSQLite
import XCTest

/// The SQLite system library links and behaves as the room store will use it.
final class SQLiteLinkTests: XCTestCase {
    func testInMemoryDatabaseRoundTripsARowThroughABoundStatement() throws {
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(":memory:", &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        XCTAssertEqual(sqlite3_exec(db, "CREATE TABLE rooms (name TEXT PRIMARY KEY, verifier BLOB)", nil, nil, nil), SQLITE_OK)
        var insert: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, "INSERT INTO rooms VALUES (?1, ?2)", -1, &insert, nil), SQLITE_OK)
        let verifier: [UInt8] = [1, 2, 3]
        XCTAssertEqual(sqlite3_bind_text(insert, 1, "r", -1, tether_sqlite_transient()), SQLITE_OK)
        XCTAssertEqual(verifier.withUnsafeBytes { sqlite3_bind_blob(insert, 2, $0.baseAddress, 3, tether_sqlite_transient()) }, SQLITE_OK)
        XCTAssertEqual(sqlite3_step(insert), SQLITE_DONE)
        sqlite3_finalize(insert)
        var select: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, "SELECT length(verifier) FROM rooms WHERE name = 'r'", -1, &select, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_step(select), SQLITE_ROW)
        XCTAssertEqual(sqlite3_column_int(select, 0), 3)
        sqlite3_finalize(select)
        XCTAssertGreaterThanOrEqual(sqlite3_libversion_number(), 3_035_000, "WAL and RETURNING need SQLite 3.35+")
    }
}
