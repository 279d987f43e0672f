import CSQLite
import Foundation
import TetherNet
import TetherRelay
import TetherStore
import TetherWire
import XCTest

/// §7.1 process protection on a relay whose storage fails underneath it.
final class ProcessProtectionTests: XCTestCase {
    func testAStorageFaultIsCountedLoggedFailsClosedAndTooManyTripTheBudgetOnce() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-fault-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.db").path
        let store = try SQLiteRoomStore(path: path)
        let room = RoomName(header: String(repeating: "a", count: 64))!
        store.setVerifier("V", of: room, now: 1)

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

        XCTAssertNil(store.verifier(of: room), "an unreadable verifier reads as absent: signed joins are refused")
        XCTAssertEqual(lines.all, ["relay: storage error (continuing): no such table: rooms"])
        XCTAssertTrue(server.metrics.render(occupancy: .init(), socketsLive: 0).contains("relay_process_exceptions_total 1\n"))
        XCTAssertEqual(tripped.all, [])
        for _ in 0..<30 { _ = store.verifier(of: room) }
        XCTAssertEqual(tripped.all, ["exit"], "the 26th within 60 s trips it, once")
        XCTAssertTrue(lines.all.contains("relay: more than 25 internal faults within 60 s; exiting for a clean restart"))
    }
}

private final class Lines: @unchecked Sendable {
    private let lock = NetLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
