import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// Faults from outside (issue 18). A full disk: the real relay with its SQLite database on a 2 MiB
/// tmpfs the test fills to the last byte: what needs a write is refused honestly, live pairs and
/// established rooms go on, `/readyz` and the metrics say so, and everything works again once
/// space returns; a relay killed and restarted on the still-full disk comes up and serves what it
/// can read. A crash: kill -9 under load loses no acknowledged registration.
extension RelayEndToEndTests {
    /// A tmpfs of `megabytes` mounted on a fresh directory (unmounted when the test ends); nil
    /// when this machine does not let the test mount one (not root).
    private func smallFilesystem(megabytes: Int) throws -> URL? {
        let directory = try scratchDirectory()
        let mounted = try runProcess("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", directory.path])
        guard mounted.status == 0 else { return nil }
        addTeardownBlock { _ = try? runProcess("/usr/bin/umount", ["-l", directory.path]) }
        return directory
    }

    func testAFullDiskRefusesWhatNeedsAWriteKeepsSplicingReportsItAndHealsWhenSpaceReturns() throws {
        guard let disk = try smallFilesystem(megabytes: 2) else { throw XCTSkip("mounting a tmpfs needs root") }
        tearDown()
        let admin = freePort()   // the admin port takes no 0; the restart below must reuse it too
        let database = disk.appendingPathComponent("relay.db").path
        try startRelay(database: database, ["--relay-admin-port", String(admin)])

        let result = try PythonPeer.run(script: "relay_client.py", arguments: ["ws://127.0.0.1:\(port)/", "disk_full", disk.path, "127.0.0.1:\(admin)"],
                                        timeout: 60)
        XCTAssertEqual(result.status, 0, String(result.stderr.suffix(800)))
        let out = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], result.stdout)
        XCTAssertEqual((out["register"] as? [Any])?.first as? Int, 200)
        XCTAssertEqual(out["ready_before"] as? [AnyHashable], [200, "ready\n"])
        XCTAssertEqual(out["free_bytes"] as? Int, 0, "the filesystem is full")

        // Refused honestly: no Result naming a token that was never stored, no challenge that was
        // never stored.
        XCTAssertEqual((out["full_mac"] as? [String: Any])?["ok"] as? Bool, true, "a Mac parks: that needs no write")
        XCTAssertNil(out["full_phone"], "the phone got no Result: \(out)")
        XCTAssertEqual(out["full_phone_close"] as? [AnyHashable], [1011, "internal error"])
        XCTAssertEqual((out["full_challenge"] as? [Any])?.first as? Int, 500)
        XCTAssertEqual(((out["full_challenge"] as? [Any])?.last as? [String: Any])?["error"] as? String, "internal error")
        // What needs only reads goes on.
        XCTAssertEqual((out["full_signed_mac"] as? [String: Any])?["ok"] as? Bool, true, "an established room joins with a signed join")
        XCTAssertEqual(out["full_signed_phone_ok"] as? Bool, true)
        XCTAssertEqual(out["full_spliced"] as? [Bool], [true, true], "the pair forwards both ways")
        // Reported, and not flapping back to ready on the reads that succeed.
        XCTAssertEqual((out["full_ready"] as? [Any])?.first as? Int, 503)
        XCTAssertTrue(((out["full_ready"] as? [Any])?.last as? String ?? "").hasPrefix("not ready: storage"), "\(out)")
        let metrics = out["full_metrics"] as? [String] ?? []
        XCTAssertTrue(metrics.contains("relay_storage_available 0"), "\(metrics)")
        XCTAssertTrue(metrics.contains { $0.hasPrefix("relay_storage_errors_total ") && $0 != "relay_storage_errors_total 0" }, "\(metrics)")

        // Healed by itself.
        XCTAssertEqual(out["freed_ready"] as? [AnyHashable], [200, "ready\n"])
        XCTAssertEqual(out["freed_phone_ok"] as? Bool, true)
        XCTAssertEqual((out["freed_register"] as? [Any])?.first as? Int, 200, "the token in the Result was stored: \(out)")
        XCTAssertEqual(out["freed_challenge_status"] as? Int, 200)
        XCTAssertEqual(out["freed_spliced"] as? Bool, true, "the pair spliced through it all")
        XCTAssertTrue(process.isRunning, "a full disk is not a reason to exit")
        let log = logLines()
        XCTAssertEqual(log.filter { $0.hasPrefix("relay: storage unavailable: room database: database or disk is full") }.count, 1,
                       "one line per outage: \(log)")
        XCTAssertEqual(log.filter { $0.hasPrefix("relay: storage available again (") }.count, 1, "\(log)")

        // Killed and restarted on a disk that is full again: it starts, and established rooms join.
        let filler = disk.appendingPathComponent("filler")
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: { _ = FileManager.default.createFile(atPath: filler.path, contents: nil); return filler.path }()))
        let chunk = Data(count: 4096)
        while (try? handle.write(contentsOf: chunk)) != nil {}
        try? handle.close()
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try startRelay(database: database, ["--relay-admin-port", String(admin)])
        let rejoined = try client("rejoin", [out["room"] as? String ?? "", out["secret"] as? String ?? ""])
        XCTAssertEqual((rejoined["signed"] as? [String: Any])?["ok"] as? Bool, true, "\(rejoined)")
        XCTAssertTrue(process.isRunning)
    }
}

extension RelayEndToEndTests {
    /// Issue 18: under `/register` load the relay is killed with -9 and restarted on the same
    /// database three times; every registration it answered 200 is still there afterwards (each
    /// room joins with a signed join).
    func testRegistrationsAnsweredBeforeAKillNineAreNeverLost() throws {
        tearDown()
        let directory = try scratchDirectory()
        let database = directory.appendingPathComponent("relay.db").path
        let registered = directory.appendingPathComponent("registered.jsonl").path
        let extra = ["--relay-ws-rate-limit", "0"]
        try startRelay(database: database, extra)
        let fixed = port   // the restarts come back where the load client connects
        let load = try PythonProcess(script: "relay_client.py", arguments: ["ws://127.0.0.1:\(fixed)/", "register_load", registered, "8"], timeout: 120)
        // Under load: a few more registrations answered 200 (the client flushes each) since the last start.
        func registeredCount() -> Int { ((try? String(contentsOfFile: registered, encoding: .utf8)) ?? "").split(separator: "\n").count }
        func whileLoaded() {
            let before = registeredCount()
            eventually("8 more registrations under load (\(registeredCount() - before) so far)", within: 30) { registeredCount() >= before + 8 }
        }
        for _ in 0..<3 {
            whileLoaded()
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try startRelay(database: database, extra, port: fixed)
        }
        whileLoaded()
        try load.input.fileHandleForWriting.close()
        let counts = load.output.fileHandleForReading.readFirstLine()
        let rejoined = try client("rejoin_all", [registered])
        let rooms = rejoined["rooms"] as? Int ?? 0
        XCTAssertGreaterThan(rooms, 20, "the load registered rooms between the kills: \(counts)")
        XCTAssertEqual(rejoined["admitted"] as? Int, rooms, "0 lost: \(rejoined), load \(counts)")
        print("crash durability: \(rooms) registrations answered 200 across 3 kill -9s, \(rejoined["admitted"] ?? 0) rejoined; load \(counts)")
    }
}
