import CSQLite
import Foundation
import TetherNet
import TetherRelay
import TetherStore
import TetherWire
import XCTest

/// §7.1 process protection on a relay whose storage fails underneath it: a store that cannot
/// answer is a degraded state, answered honestly, and never a process fault that ends with an
/// exit dropping every live splice.
final class ProcessProtectionTests: XCTestCase {
    func testABrokenDatabaseFailsEachCallHonestlyIsLoggedOnceAndNeverTripsTheFaultBudget() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-fault-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.db").path
        let store = try SQLiteRoomStore(path: path)
        let room = RoomName(header: String(repeating: "a", count: 64))!
        try store.setVerifier("V", of: room, now: 1)

        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let lines = Lines()
        let server = RelayServer(configuration: RelayConfiguration(), group: group, store: store) { lines.append($0) }
        let tripped = Lines()
        server.onFaultBudgetExceeded = { tripped.append("exit") }

        // Another process breaks the schema under the running relay.
        var other: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &other), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(other, "DROP TABLE rooms", nil, nil, nil), SQLITE_OK)
        sqlite3_close(other)

        XCTAssertThrowsError(try store.verifier(of: room), "an unreadable verifier is an error, never \"not established\"") {
            XCTAssertEqual($0 as? StoreError, StoreError("room database: no such table: rooms"))
        }
        for _ in 0..<30 {
            let swept = expectation(description: "sweep")
            server.housekeep(now: .milliseconds(1_000)) { swept.fulfill() }
            wait(for: [swept], timeout: 10)
        }
        XCTAssertEqual(lines.all, ["relay: storage unavailable: room database: no such table: rooms; refusing what needs it (1011/500 internal error), splicing the rest"])
        let metrics = server.metrics.render(occupancy: .init(), socketsLive: 0)
        XCTAssertTrue(metrics.contains("relay_storage_errors_total 30\n"), metrics)
        XCTAssertTrue(metrics.contains("relay_process_exceptions_total 0\n"), metrics)
        XCTAssertEqual(tripped.all, [], "30 failed sweeps in a minute are not 30 process faults")
        XCTAssertEqual(server.readiness.failing(), ["storage"])
    }
}

private final class Lines: @unchecked Sendable {
    private let lock = NetLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
