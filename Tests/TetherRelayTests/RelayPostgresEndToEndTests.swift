import Foundation
import Glibc
import TetherStore
import TetherTestSupport
import XCTest

/// The real `tether relay` on PostgreSQL (`RELAY_DB=postgres://…`), with a server of the test's
/// own: the operator's `tether db migrate` shows the steps, a relay applies them at start, what one
/// node stores (a verifier, the shard map) another node on the same database serves at once, and a
/// node killed with -9 loses nothing acknowledged.
extension RelayEndToEndTests {
    func testRelayNodesOnOnePostgresDatabaseShareEstablishedRoomsAndTheShardMap() throws {
        guard PostgresServer.isInstalled else { throw XCTSkip("PostgreSQL is not installed (scripts/install-deps)") }
        let server = try PostgresServer()
        defer { server.shutdown() }
        let url = try server.createDatabase()
        process.interrupt()
        process.waitUntilExit()

        let (status, output) = try TetherBinary.run(["db", "migrate", "--relay-db", url])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.hasPrefix("db: relay schema in postgres://127.0.0.1:\(server.port)/tether_1: would apply 2 steps\n"), output)
        XCTAssertTrue(output.contains("  1: room records, ephemeral secrets, assertion counters and the shard map\n"), output)
        XCTAssertTrue(output.contains("CREATE TABLE relay_rooms"), "the SQL it would run: \(output)")
        let (showStatus, showOutput) = try TetherBinary.run(["shardmap", "show", "--relay-db", url])
        XCTAssertEqual(showStatus, 1, "an operator command never creates the schema")
        XCTAssertTrue(showOutput.contains("no relay schema in postgres://127.0.0.1:\(server.port)/tether_1"), showOutput)

        try startRelay(database: url)
        let registered = try client("register")
        XCTAssertEqual(registered["status"] as? Int, 200)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let (again, upToDate) = try TetherBinary.run(["db", "migrate", "--relay-db", url])
        XCTAssertEqual(again, 0, upToDate)
        XCTAssertEqual(upToDate, "db: relay schema in postgres://127.0.0.1:\(server.port)/tether_1 is up to date (version 2)\n")

        // Another node (another port, the same database) serves the room a killed node registered.
        try startRelay(database: url)
        let rejoined = try client("rejoin", [registered["room"] as? String ?? "", registered["secret"] as? String ?? ""])
        XCTAssertEqual((rejoined["unsigned"] as? [String: Any])?["error"] as? String, "signature required", "still established")
        XCTAssertEqual((rejoined["signed"] as? [String: Any])?["ok"] as? Bool, true)
        XCTAssertEqual(try server.query("SELECT count(*) FROM relay_rooms WHERE verifier IS NOT NULL", database: "tether_1"), "1")
    }
}
