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
        XCTAssertTrue(output.hasPrefix("db: relay schema in postgres://127.0.0.1:\(server.port)/tether_1: would apply 3 steps\n"), output)
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
        XCTAssertEqual(upToDate, "db: relay schema in postgres://127.0.0.1:\(server.port)/tether_1 is up to date (version 3)\n")

        // Another node (another port, the same database) serves the room a killed node registered.
        try startRelay(database: url)
        let rejoined = try client("rejoin", [registered["room"] as? String ?? "", registered["secret"] as? String ?? ""])
        XCTAssertEqual((rejoined["unsigned"] as? [String: Any])?["error"] as? String, "signature required", "still established")
        XCTAssertEqual((rejoined["signed"] as? [String: Any])?["ok"] as? Bool, true)
        XCTAssertEqual(try server.query("SELECT count(*) FROM relay_rooms WHERE verifier IS NOT NULL", database: "tether_1"), "1")
    }

    /// Grey failures of the database, as a node meets them: started while PostgreSQL is down, it
    /// waits (one line) and starts once the database answers, instead of exiting; when the
    /// database then hangs (stopped, not down), `/readyz` turns not-ready within 5 s and a
    /// request that needs storage is answered — with the spec's error — within the stated bound
    /// rather than as long as the hang; once the database resumes the node is ready again and
    /// nothing stored was lost.
    func testARelayWaitsForItsDatabaseAtStartAndTellsTheTruthWhileTheDatabaseHangs() throws {
        guard PostgresServer.isInstalled else { throw XCTSkip("PostgreSQL is not installed (scripts/install-deps)") }
        let server = try PostgresServer()
        defer { server.shutdown() }
        let url = try server.createDatabase()
        try server.stop()
        DispatchQueue.global().asyncAfter(deadline: .now() + 2) { try? server.start() }
        let admin = freePort()   // the admin port takes no 0 (and the relay names it only in its log)
        try startRelay(database: url, ["--relay-admin-port", String(admin)])
        let lines = logLines()
        XCTAssertEqual(lines.filter { $0.contains("waiting for it (retrying with back-off, not listening until it answers)") }.count, 1, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("relay: RELAY_DB: database: cannot connect: ") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("relay: RELAY_DB: the database answered after ") }, "\(lines)")

        func readiness() -> String {
            (try? runProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", "http://127.0.0.1:\(admin)/readyz"]).stdout) ?? ""
        }
        XCTAssertEqual(readiness(), "200")
        let registered = try client("register")
        XCTAssertEqual(registered["status"] as? Int, 200)
        let room = registered["room"] as? String ?? "", secret = registered["secret"] as? String ?? ""

        try server.pause()
        defer { try? server.resume() }
        let paused = Date()
        let notReadyAfter = Eventually.poll(within: 10, every: 0.05) { readiness() == "503" ? Date().timeIntervalSince(paused) : nil }.0
        print("database hung: /readyz not ready after \(String(format: "%.2f", notReadyAfter ?? -1)) s")
        XCTAssertLessThanOrEqual(notReadyAfter ?? 99, 5, "not ready within 5 s of the hang")
        let asked = Date()
        let refused = try PythonPeer.run(script: "relay_client.py", arguments: ["ws://127.0.0.1:\(port)/", "rejoin", room, secret], timeout: 60)
        XCTAssertLessThan(Date().timeIntervalSince(asked), 5, "answered within the bound, not as long as the hang")
        XCTAssertTrue(refused.stderr.contains("received 1011 (internal error) internal error"), "the spec's answer: \(refused.stderr.suffix(400))")

        try server.resume()
        eventually("ready again once the database answers (/readyz \(readiness()))", within: 15, poll: 0.05) { readiness() == "200" }
        let rejoined = try client("rejoin", [room, secret])
        XCTAssertEqual((rejoined["signed"] as? [String: Any])?["ok"] as? Bool, true, "nothing stored was lost: \(rejoined)")
    }
}
