import Foundation
import Glibc
import TetherStore
import TetherTestSupport
import XCTest

/// The real `tether relay` binary on a loopback port, driven by the Python `websockets` client.
final class RelayEndToEndTests: XCTestCase {
    var process: Process!
    var port: UInt16 = 0
    /// The relay's stderr (its log), for the zero-PII and lifecycle-line checks.
    private var logFile: URL!

    /// A port that was free a moment ago: only for a test that must know the relay's port before
    /// it starts (a shard map naming it, pebble told where to validate); others start on port 0.
    func freePort() -> UInt16 { RelayProcess.freePort() }

    override func setUpWithError() throws {
        try startRelay(database: ":memory:")
    }

    /// Starts `tether relay --local` with `database` on port 0 (or `fixed`); waits for its start-up
    /// line and takes the port it bound from it.
    func startRelay(database: String, _ extra: [String] = [], port fixed: UInt16? = nil, local: Bool = true, host: String = "127.0.0.1") throws {
        let binary = TetherBinary.url
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw Vectors.Failure.notFound("\(binary.path): build the tether product first (make test does)")
        }
        // A test that starts its own relay replaces setUp's, which must not outlive it.
        stopRelay()
        port = fixed ?? 0
        process = Process()
        process.executableURL = binary
        process.arguments = ["relay"] + (local ? ["--local"] : []) + (host == "127.0.0.1" ? [] : ["--relay-host", host])
            + ["--relay-port", String(port), "--relay-db", database] + extra
        let output = Pipe()
        process.standardOutput = output
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("tether-relay-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: logFile)
        try process.runWithSignalsUnblocked()
        let line = output.fileHandleForReading.readFirstLine()
        if fixed == nil { port = RelayProcess.listeningPort(line) ?? 0 }
        XCTAssertTrue(line.hasPrefix("relay: listening on \(host.contains(":") ? "[\(host)]" : host):\(port) (db=\(StoreLocation(database).display), attest=\(local ? "false" : "required"), tls="),
                      line)
    }

    override func tearDown() {
        stopRelay()
    }

    private func stopRelay() {
        if process?.isRunning == true {
            process.interrupt()
            process.waitUntilExit()
        }
        if let logFile { try? FileManager.default.removeItem(at: logFile) }
    }

    /// A fresh directory, removed when the test ends.
    func scratchDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }

    /// The log so far, once it has stopped growing (lines are written as sockets close).
    func logLines() -> [String] {
        var previous = -1
        var text = ""
        _ = Eventually.holds(within: 1, every: 0.05) {
            text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
            defer { previous = text.utf8.count }
            return text.utf8.count == previous
        }
        return text.split(separator: "\n").map(String.init)
    }

    func client(_ scenario: String, _ extra: [String] = [], scheme: String = "ws", host: String = "127.0.0.1") throws -> [String: Any] {
        let result = try PythonPeer.run(script: "relay_client.py", arguments: ["\(scheme)://\(host):\(port)/", scenario] + extra, timeout: 60)
        XCTAssertEqual(result.status, 0, String(result.stderr.suffix(800)))
        return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    func testPairingSplicesEveryFrameByteForByteBothWaysAndPropagatesPeerGone() throws {
        let result = try client("pair")
        XCTAssertEqual(result["nonce_length"] as? Int, 44)
        XCTAssertEqual((result["mac_result"] as? [String: Bool])?["ok"], true)
        XCTAssertEqual(result["phone_ok"] as? Bool, true)
        XCTAssertEqual(result["token_length"] as? Int, 32)
        XCTAssertEqual(result["phone_to_mac_ok"] as? Bool, true)
        XCTAssertEqual(result["mac_to_phone_ok"] as? Bool, true)
        XCTAssertEqual(result["mac_close"] as? [AnyHashable], [1001, "peer gone"])

        let log = logLines()
        let room = try XCTUnwrap(result["room"] as? String)
        let tag = try XCTUnwrap(log.first { $0.hasSuffix(" connect") }?.split(separator: " ")[1])
        XCTAssertEqual(log.filter { $0.hasPrefix("relay \(tag) ") && $0.contains(" admit role=") }.count, 2, "\(log)")
        XCTAssertTrue(log.contains { $0.hasPrefix("relay \(tag) disconnect initiator=remote role=phone state=admitted code=1000 lived=") }, "\(log)")
        XCTAssertTrue(log.contains { $0.hasPrefix("relay \(tag) disconnect initiator=relay role=mac state=admitted code=1001 reason=peer gone lived=") }, "\(log)")
        XCTAssertFalse(log.joined().contains(room), "room names never reach the log")
        XCTAssertFalse(log.filter { $0.hasPrefix("relay ") }.joined().contains("127.0.0.1"), "nor do client IPs")
    }

    func testTheFortyFirstProofInTenSecondsIsRefusedEvenWhenEachCameOnAFreshSocketFromItsOwnAddress() throws {
        let result = try client("admission_window")
        let attempts = try XCTUnwrap(result["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.count, 45)
        XCTAssertLessThan(result["seconds"] as? Double ?? 99, 10, "all within one window")
        for (index, attempt) in attempts.enumerated() {
            let verdict = attempt["result"] as? [String: Any]
            if index < 40 {
                XCTAssertEqual(verdict?["ok"] as? Bool, true, "attempt \(index + 1): \(attempt)")
            } else {
                XCTAssertEqual(verdict?["error"] as? String, "rate limited", "attempt \(index + 1): \(attempt)")
                XCTAssertEqual(attempt["close"] as? [AnyHashable], [1008, "rate limited"])
            }
        }
    }

    func testAPhoneThatNeverReadsStopsTheRelayReadingItsMacSoMemoryStaysBounded() throws {
        try startRelay(database: ":memory:", ["--relay-max-frames-per-sec", "0", "--relay-daily-byte-quota", "100000000000"])
        let result = try client("flood", [String(process.processIdentifier)])
        XCTAssertEqual((result["mac"] as? [String: Any])?["ok"] as? Bool, true)
        XCTAssertEqual((result["phone"] as? [String: Any])?["ok"] as? Bool, true)
        let sent = try XCTUnwrap(result["sent_bytes"] as? Int)
        let growth = try XCTUnwrap(result["rss_growth_kib"] as? Int)
        // Without back-pressure the relay reads the flood at loopback speed (gigabytes in seconds)
        // and holds it; with it, the mac is stopped once the kernel buffers and one queue are full.
        XCTAssertLessThan(sent, 64 << 20, "the relay stopped reading the mac")
        XCTAssertLessThan(growth, 8 * 1024, "RSS grew \(growth) KiB")
        XCTAssertGreaterThan(result["round_trips"] as? Int ?? 0, 20, "an unrelated pair kept its splice meanwhile")
        XCTAssertLessThan(result["rtt_p99_ms"] as? Double ?? 1e9, 200)
    }

    /// Whether load figures mean anything in this build: under ThreadSanitizer (make check-tsan)
    /// the relay runs 5-15 times slower with shadow memory beside every allocation, so a ping
    /// flood starves the unrelated pair and the peak grows. The floods still run there, for the
    /// races they may show.
    #if TETHER_TSAN
    private let measuresLoad = false
    #else
    private let measuresLoad = true
    #endif

    /// Issue 18: 100 admitted macs, each from its own address, flood pings (never reading the
    /// pongs), close frames, or the 1-byte fragments of a message that never ends; the relay's
    /// memory stays bounded, the close flooders are closed, and an unrelated pair goes on.
    func testFloodsOfPingsClosesAndTinyFragmentsStayBoundedAndSpareOtherPairs() throws {
        let result = try client("control_flood", [String(process.processIdentifier)])
        for kind in ["ping", "close", "fragments"] {
            let figures = try XCTUnwrap(result[kind] as? [String: Any], "\(result)")
            guard measuresLoad else { continue }
            XCTAssertLessThan(figures["rss_peak_growth_kib"] as? Int ?? .max, 16 * 1024, "\(kind): \(figures)")
            XCTAssertGreaterThan(figures["round_trips"] as? Int ?? 0, 5, "\(kind): the unrelated pair kept its splice: \(figures)")
        }
        XCTAssertEqual((result["close"] as? [String: Any])?["flooders_closed"] as? Int, 100, "a close ends the connection: the rest is never read")
    }

    /// Issue 29: a socket with no credential at all (App Attest required, no Hello) floods pings
    /// through a 4 KiB receive window and never reads. Its pongs coalesce and its output is
    /// bounded, so the relay grows by no more than a couple of MiB (before: 674 MB in 2 s).
    func testAFloodOfPingsBeforeAnyHelloThatNeverReadsLeavesTheRelaysMemoryBounded() throws {
        try startRelay(database: ":memory:", ["--relay-origin", "https://relay.test", "--app-id", "TEAMID.example.app"], local: false)
        let (status, output) = try ServiceProcess.runPeer("unread_flood.py", [
            "127.0.0.1", String(port), "/", "x-relay-room: \(String(repeating: "ab", count: 32))", String(process.processIdentifier), "ping", "3",
        ])
        XCTAssertEqual(status, 0, output)
        let result = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], output)
        XCTAssertGreaterThan(result["sent"] as? Int ?? 0, 1 << 20, "the flood ran: \(result)")
        guard measuresLoad else { return }
        let growth = (result["rss_max_kb"] as? Int ?? .max) - (result["rss_start_kb"] as? Int ?? 0)
        XCTAssertLessThan(growth, 4 * 1024, "kB: \(result)")
    }

    func testGateRefusalsAndMacOffline() throws {
        let result = try client("gate")
        XCTAssertEqual(result["origin"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["bad_room"] as? [AnyHashable], [400, "bad room"])
        let alone = result["phone_alone"] as? [String: Any]
        XCTAssertEqual(alone?["ok"] as? Bool, false)
        XCTAssertEqual(alone?["error"] as? String, "mac offline")
        XCTAssertEqual(result["phone_alone_close"] as? [AnyHashable], [1008, "mac offline"])
    }

    func testSIGTERMStopsTheRelayCleanly() throws {
        process.terminate()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }
}

extension RelayEndToEndTests {
    func testRegisterSignedRejoinAndDeleteWithAnIndependentClient() throws {
        let result = try client("lifecycle")
        func pair(_ key: String) -> (Int?, [String: Any]?) {
            let value = result[key] as? [Any]
            return (value?.first as? Int, value?.last as? [String: Any])
        }
        XCTAssertEqual(pair("register").0, 200)
        XCTAssertEqual(pair("register_again").0, 403)
        XCTAssertEqual(pair("register_again").1?["error"] as? String, "already registered")
        XCTAssertEqual(pair("attest_open_mode").0, 400)
        XCTAssertEqual(pair("attest_open_mode").1?["error"] as? String, "attestation disabled")
        XCTAssertEqual((result["unsigned_join"] as? [String: Any])?["error"] as? String, "signature required")
        XCTAssertEqual((result["signed_mac"] as? [String: Any])?["ok"] as? Bool, true)
        XCTAssertEqual(result["signed_phone_ok"] as? Bool, true)
        XCTAssertEqual(result["challenge_status"] as? Int, 200)
        XCTAssertEqual(pair("delete").0, 200)
        XCTAssertEqual(result["closes"] as? [[AnyHashable]], [[1000, "room deleted"], [1000, "room deleted"]])
        XCTAssertEqual(pair("delete_again").1?["error"] as? String, "not established")
        XCTAssertEqual(result["unknown_path"] as? [AnyHashable], [501, "not implemented"])
        // Each end counted once under the reason the relay sent (Tether's relay_sockets_closed_total).
        func closes(_ reason: String) -> String? {
            let metrics = (try? runProcess("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/metrics"]).stdout) ?? ""
            return metrics.split(separator: "\n").first { $0.hasPrefix("relay_sockets_closed_total{reason=\"\(reason)\"} ") }
                .map { String($0.split(separator: " ")[1]) }
        }
        XCTAssertTrue(eventually("both deleted-room closes counted") { closes("room_deleted") == "2" }, String(describing: closes("room_deleted")))
        XCTAssertEqual(closes("signature_required"), "1")
        XCTAssertEqual(closes("other"), "0")
    }
}

extension RelayEndToEndTests {
    func testAnEstablishedRoomSurvivesKillDashNine() throws {
        process.interrupt()
        process.waitUntilExit()
        let directory = try scratchDirectory()
        let database = directory.appendingPathComponent("relay.db").path
        try startRelay(database: database)
        let registered = try client("register")
        XCTAssertEqual(registered["status"] as? Int, 200)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try startRelay(database: database)
        let rejoined = try client("rejoin", [registered["room"] as? String ?? "", registered["secret"] as? String ?? ""])
        XCTAssertEqual((rejoined["unsigned"] as? [String: Any])?["error"] as? String, "signature required", "still established")
        XCTAssertEqual((rejoined["signed"] as? [String: Any])?["ok"] as? Bool, true)
    }
}

extension RelayEndToEndTests {
    func testMetricsAnswerOnlyADirectLoopbackScrapeAndCountWhatHappened() throws {
        let result = try client("metrics")
        XCTAssertEqual(result["status"] as? Int, 200)
        XCTAssertEqual(result["content_type"] as? String, "text/plain; version=0.0.4")
        XCTAssertEqual(result["query_status"] as? Int, 200)
        XCTAssertEqual(result["origin_status"] as? Int, 200, "/metrics is answered before the Origin gate")
        XCTAssertEqual(result["forwarded"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["cf"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["healthz"] as? [AnyHashable], [200, "ok\n"])
        XCTAssertEqual(result["healthz_forwarded"] as? [AnyHashable], [403, "forbidden"])
        let series = try XCTUnwrap(result["series"] as? [String: Double])
        XCTAssertEqual(series["relay_phone_no_mac_total"], 1)
        XCTAssertEqual(series["relay_quota_exceeded_total"], 0)
        XCTAssertEqual(series["relay_ws_upgrades_rejected_total{reason=\"gate\"}"], 2)
        XCTAssertEqual(series["relay_ws_upgrades_total"], 2)
        XCTAssertEqual(series["relay_rooms_live"], 1)
        XCTAssertEqual(series["relay_rooms_mac_only"], 1)
        XCTAssertEqual(series["relay_sockets_live"], 1)
        XCTAssertEqual(series["relay_socket_lifetime_seconds_count"], 1, "the phone's socket closed")
        XCTAssertEqual(series["relay_socket_lifetime_seconds_bucket{le=\"+Inf\"}"], 1)
        XCTAssertEqual(result["help_lines"] as? Int, result["type_lines"] as? Int)
    }
}

extension RelayEndToEndTests {
    func testANewRoomBeyondTheResidentCapIsRefusedButResidentRoomsStillServe() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-max-rooms", "1"])
        let result = try client("roomcap")
        XCTAssertEqual(result["upgrade"] as? [AnyHashable], [503, "capacity"])
        XCTAssertEqual(result["http"] as? [AnyHashable], [503, "capacity"])
        XCTAssertEqual((result["resident_phone"] as? [String: Any])?["ok"] as? Bool, true)
        XCTAssertEqual(result["rejections"] as? [String], [#"relay_ws_upgrades_rejected_total{reason="room_cap"} 1"#],
                       "§2.3 step 5's label; the HTTP refusal is no upgrade")
    }
}

extension RelayEndToEndTests {
    func testOversizedFramesCloseTheSenderAndThePeerHearsPeerGone() throws {
        let result = try client("oversize")
        XCTAssertEqual(result["app_cap"] as? [[AnyHashable]], [[1009, "frame too large"], [1001, "peer gone"]])
        XCTAssertEqual(result["transport_cap"] as? [[AnyHashable]], [[1009, ""], [1001, "peer gone"]])
    }
}

extension RelayEndToEndTests {
    func testSIGUSR2TogglesVerboseLinesAtRuntime() throws {
        _ = try client("roomcap")   // some HTTP traffic while verbose is off
        XCTAssertFalse(logLines().contains { $0.contains(" POST /attest/challenge -> ") })
        kill(process.processIdentifier, SIGUSR2)
        XCTAssertTrue(logLines().contains("relay: verbose logging on (SIGUSR2)"))
        _ = try client("roomcap")
        XCTAssertTrue(logLines().contains { $0.hasPrefix("relay ") && $0.hasSuffix(" POST /attest/challenge -> 200") }, "\(logLines())")
        XCTAssertTrue(process.isRunning)
    }
}

extension RelayEndToEndTests {
    func testASocketThatNeverAnswersAPingIsDroppedWithoutACloseFrameAndCounted() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-keepalive-ms", "300"])
        let result = try client("silent")
        XCTAssertEqual(result["status_line"] as? String, "HTTP/1.1 101 Switching Protocols")
        XCTAssertEqual(result["opcodes"] as? [Int], [0x9], "one ping, then TCP dropped: no close frame (the client sees 1006)")
        let seconds = try XCTUnwrap(result["seconds"] as? Double)
        XCTAssertGreaterThan(seconds, 0.25)
        XCTAssertLessThan(seconds, 3)
        XCTAssertTrue(logLines().contains { $0.contains(" keepalive no-pong; terminating role=? lived=") }, "\(logLines())")
        XCTAssertTrue(logLines().contains { $0.contains(" disconnect initiator=remote role=? state=hello code=1006 lived=") }, "\(logLines())")
    }
}

extension RelayEndToEndTests {
    func testShardingServesTheMapRefusesForeignRoomsWith421AndClosesMovedRooms4421() throws {
        tearDown()
        let directory = try scratchDirectory()
        let database = directory.appendingPathComponent("relay.db").path
        let mapFile = directory.appendingPathComponent("map.json")
        let port = freePort()   // known before start: the shard map names the node by it
        // Local mode's origin is http://127.0.0.1:<port>, so the node's map host is 127.0.0.1:<port>.
        let map = #"{"version":1,"ranges":[{"low":0,"high":32767,"host":"127.0.0.1:\#(port)"},{"low":32768,"high":65535,"host":"relay2.example"}]}"#
        try Data(map.utf8).write(to: mapFile)
        try startRelay(database: database, ["--relay-shard-map", mapFile.path], port: port)
        let binary = TetherBinary.url.path
        let result = try client("shard", [binary, database])

        let served = try XCTUnwrap(result["map"] as? [Any])
        XCTAssertEqual(served[0] as? Int, 200)
        XCTAssertEqual((served[1] as? [String: String])?["content-type"], "application/json")
        XCTAssertEqual((served[1] as? [String: String])?["cache-control"], "no-store")
        XCTAssertEqual(served[2] as? String, map, "the published map, compact")
        let head = try XCTUnwrap(result["map_head"] as? [Any])
        XCTAssertEqual(head[0] as? Int, 200)
        XCTAssertEqual(head[2] as? String, "", "HEAD has no body")
        XCTAssertEqual(result["map_with_origin"] as? Int, 200, "the map is public: Origin does not matter")

        let misdirected = try XCTUnwrap(result["http_misdirected"] as? [Any])
        XCTAssertEqual(misdirected[0] as? Int, 421)
        XCTAssertEqual((misdirected[1] as? [String: String])?["x-relay-owner"], "relay2.example")
        XCTAssertEqual((misdirected[1] as? [String: String])?["content-type"], "text/plain")
        XCTAssertEqual(misdirected[2] as? String, "misdirected")
        XCTAssertEqual(result["http_origin_first"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["http_bad_room_first"] as? [AnyHashable], [400, "bad room"])
        XCTAssertEqual(result["http_mine"] as? Int, 200)

        let upgrade = try XCTUnwrap(result["upgrade_misdirected"] as? [Any])
        XCTAssertEqual(upgrade[0] as? String, "HTTP/1.1 421 Misdirected Request")
        let fields = try XCTUnwrap(upgrade[1] as? [String: String])
        XCTAssertEqual(fields["x-relay-owner"], "relay2.example")
        XCTAssertEqual(fields["connection"], "close")
        XCTAssertEqual(fields["content-type"], "text/plain")
        XCTAssertEqual(fields["content-length"], "11")
        XCTAssertEqual(upgrade[2] as? String, "misdirected")

        XCTAssertEqual(result["phone_ok"] as? Bool, true)
        XCTAssertEqual((result["publish"] as? [Any])?.first as? Int, 0)
        XCTAssertEqual(result["closes"] as? [[AnyHashable]], [[4421, "reshard relay3.example"], [4421, "reshard relay3.example"]],
                       "both legs hear the relay's own close; no peer-gone propagation")
        XCTAssertEqual((result["map_after"] as? [String: Any])?["version"] as? Int, 2)
        XCTAssertEqual(result["upgrade_moved"] as? [String], ["HTTP/1.1 421 Misdirected Request", "misdirected"])
        XCTAssertEqual((result["newly_mine_mac"] as? [String: Any])?["ok"] as? Bool, true, "the bucket that moved in is served")
        XCTAssertEqual(result["misdirected_metric"] as? [String], [#"relay_ws_upgrades_rejected_total{reason="misdirected"} 2"#])
        XCTAssertTrue(logLines().contains("relay: shard map version 2 adopted; this node (127.0.0.1:\(port)) owns 32768 of 65536 buckets"), "\(logLines())")
    }
}

extension RelayEndToEndTests {
    /// A value from the peer's JSON as compact JSON with sorted keys (booleans stay booleans).
    private func json(_ value: Any?) -> String {
        guard let value, let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else { return "nil" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The messages (a challenge shows as `true`) and the close of a refused socket.
    private func refusal(_ value: Any?) -> (messages: [String], close: [AnyHashable]?) {
        let object = value as? [String: Any]
        return ((object?["messages"] as? [Any] ?? []).map { json($0) }, object?["close"] as? [AnyHashable])
    }

    func testEveryAdmissionTimeCloseOfTheCatalogueOnTheWire() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-established-idle-ttl-ms", "1000"])
        let result = try client("catalogue")
        XCTAssertEqual(result["displaced"] as? [AnyHashable], [1000, "displaced"])
        XCTAssertEqual(result["respliced"] as? Bool, true, "the phone is spliced to the newcomer, not closed")
        let occupied = refusal(result["slot_occupied"])
        XCTAssertEqual(occupied.messages, ["true", #"{"error":"slot occupied","ok":false}"#])
        XCTAssertEqual(occupied.close, [1008, "slot occupied"])
        XCTAssertEqual(result["incumbent_untouched"] as? Bool, true)
        for name in ["bad_hello", "bad_hello_v"] {
            XCTAssertEqual(refusal(result[name]).messages, [], "no Result before a bad-hello close")
            XCTAssertEqual(refusal(result[name]).close, [1008, "bad hello"])
        }
        XCTAssertEqual(refusal(result["bad_proof"]).messages, ["true", #"{"error":"bad proof","ok":false}"#])
        XCTAssertEqual(refusal(result["bad_proof"]).close, [1008, "bad proof"])
        XCTAssertEqual(result["too_many_pending"] as? [AnyHashable], [1008, "too many pending"])
        XCTAssertEqual(result["forty_admitted"] as? Bool, true)
        XCTAssertEqual(refusal(result["rate_limited"]).messages, ["true", #"{"error":"rate limited","ok":false}"#])
        XCTAssertEqual(refusal(result["rate_limited"]).close, [1008, "rate limited"])
        XCTAssertEqual(result["eight_phones"] as? [Bool], Array(repeating: true, count: 8))
        XCTAssertEqual(refusal(result["pairing_cycle_cap"]).messages, ["true"], "no Result frame, only the close")
        XCTAssertEqual(refusal(result["pairing_cycle_cap"]).close, [1000, "pairing cycle cap"])
        XCTAssertEqual(result["pairing_cycle_cap_mac"] as? [AnyHashable], [1000, "pairing cycle cap"])
        XCTAssertEqual(json(result["bad_signature"]), #"{"error":"bad signature","ok":false}"#)
        XCTAssertEqual(result["bad_signature_close"] as? [AnyHashable], [1008, "bad signature"])
        XCTAssertEqual(result["invalid_utf8_admitted"] as? Bool, true)
        XCTAssertEqual(result["invalid_utf8"] as? [[AnyHashable]], [[1007, ""], [1001, "peer gone"]])
        XCTAssertEqual(result["protocol_violation_admitted"] as? Bool, true)
        XCTAssertEqual(result["protocol_violation"] as? [[AnyHashable]], [[1002, ""], [1001, "peer gone"]])
        let timeout = try XCTUnwrap(result["admission_timeout"] as? [String: Any])
        XCTAssertEqual(timeout["close"] as? [AnyHashable], [1008, "admission timeout"])
        let seconds = try XCTUnwrap(timeout["seconds"] as? Double)
        XCTAssertGreaterThanOrEqual(seconds, 15)
        XCTAssertLessThanOrEqual(seconds, 30)
        // §3.9 Tether: in a room whose mac has been parked for 16 s (its first housekeeping long
        // gone), a pre-auth socket still gets its deadline.
        let longLived = try XCTUnwrap(result["long_lived_admission_timeout"] as? [String: Any])
        XCTAssertEqual(longLived["close"] as? [AnyHashable], [1008, "admission timeout"])
        XCTAssertGreaterThanOrEqual(longLived["seconds"] as? Double ?? 0, 15)
        XCTAssertLessThanOrEqual(longLived["seconds"] as? Double ?? 99, 30)
        let expired = try XCTUnwrap(result["room_expired"] as? [String: Any])
        XCTAssertEqual(expired["register"] as? Int, 200)
        XCTAssertEqual(expired["closes"] as? [[AnyHashable]], [[1000, "room expired"], [1000, "room expired"]])
    }

    func testFrameRateDailyQuotaAndShutdownClosesOnTheWire() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-max-frames-per-sec", "20", "--relay-daily-byte-quota", "100000"])
        let result = try client("abuse", [String(process.processIdentifier)])
        XCTAssertEqual(result["frame_rate"] as? [[AnyHashable]], [[1008, "frame rate exceeded"], [1001, "peer gone"]])
        XCTAssertEqual(result["under_quota_delivered"] as? Bool, true)
        XCTAssertEqual(result["quota"] as? [[AnyHashable]], [[1008, "daily quota exceeded"], [1008, "daily quota exceeded"]])
        XCTAssertEqual(result["readmitted"] as? [Bool], [true, true], "the room's state survives a trip")
        XCTAssertEqual(result["quota_retrips"] as? [[AnyHashable]], [[1008, "daily quota exceeded"], [1008, "daily quota exceeded"]])
        XCTAssertEqual(result["quota_metric"] as? [String], ["relay_quota_exceeded_total 4"])
        XCTAssertEqual(result["shutdown"] as? [[AnyHashable]], [[1001, "server shutting down"], [1001, "server shutting down"]])
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }

    func testEntryLevelRefusalsOnTheWire() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-trust-proxy", "true", "--relay-max-sockets-per-ip", "2", "--relay-max-total-sockets", "4",
                                              "--relay-ws-rate-limit", "6", "--relay-attest-rate-limit", "3"])
        let result = try client("limits")
        let switching = ["HTTP/1.1 101 Switching Protocols"] as [AnyHashable]
        XCTAssertEqual(result["ip_a"] as? [[AnyHashable]], [switching, switching, ["HTTP/1.1 429 Too Many Requests", "too many connections"]])
        XCTAssertEqual(result["ip_b"] as? [[AnyHashable]], [switching, switching])
        let capacity = ["HTTP/1.1 503 Service Unavailable", "capacity"] as [AnyHashable]
        XCTAssertEqual(result["ip_c"] as? [[AnyHashable]], Array(repeating: capacity, count: 6) + [["HTTP/1.1 429 Too Many Requests", "rate limited"]],
                       "the limiter counts refused upgrades too")
        XCTAssertEqual(result["attest"] as? [[AnyHashable]], [[200], [200], [200], [429, "rate limited"]])
        XCTAssertEqual(result["attest_other_ip"] as? [AnyHashable], [200])
        XCTAssertEqual(result["too_large"] as? [String], ["HTTP/1.1 413 Payload Too Large", "payload too large"])
        XCTAssertEqual(result["too_large_with_origin"] as? [String], ["HTTP/1.1 403 Forbidden", "forbidden"], "§2.2: the gate precedes the body cap")
        XCTAssertEqual(result["too_large_bad_room"] as? [String], ["HTTP/1.1 400 Bad Request", "bad room"])
        XCTAssertEqual(result["rejections"] as? [String], [#"relay_ws_upgrades_rejected_total{reason="ip_cap"} 1"#,
                                                          #"relay_ws_upgrades_rejected_total{reason="rate_limited"} 1"#,
                                                          #"relay_ws_upgrades_rejected_total{reason="total_cap"} 6"#])
    }

    func testAttestationModeRefusesPhonesWithoutAValidTicket() throws {
        tearDown()
        try startRelay(database: ":memory:", ["--relay-origin", "https://relay.test", "--app-id", "TEAMID.example.app"], local: false)
        let result = try client("attested")
        XCTAssertEqual(json(result["mac"]), #"{"ok":true}"#, "a pairing-mode mac needs nothing")
        XCTAssertEqual(refusal(result["no_ticket"]).messages, ["true", #"{"error":"ticket required","ok":false}"#])
        XCTAssertEqual(refusal(result["no_ticket"]).close, [1008, "ticket required"])
        XCTAssertEqual(refusal(result["bad_ticket"]).messages, ["true", #"{"error":"bad ticket","ok":false}"#])
        XCTAssertEqual(refusal(result["bad_ticket"]).close, [1008, "bad ticket"])
        XCTAssertEqual(result["challenge"] as? [Int], [200, 44])
        XCTAssertEqual((result["attest"] as? [Any])?.first as? Int, 403)
    }
}

extension RelayEndToEndTests {
    func testMalformedInputOfEveryKindLeavesASplicedPairIntact() throws {
        let result = try client("malformed")
        let http = try XCTUnwrap(result["http"] as? [String: String])
        XCTAssertEqual(http["garbage"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["bad_request_line"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["huge_header"], "HTTP/1.1 431 Request Header Fields Too Large")
        XCTAssertEqual(http["both_lengths"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["bad_chunk"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["bad_json"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["bad_key"], "HTTP/1.1 400 Bad Request")
        XCTAssertEqual(http["bad_version"], "HTTP/1.1 400 Bad Request")
        let frames = try XCTUnwrap(result["websocket"] as? [String: [AnyHashable]])
        XCTAssertEqual(frames["unmasked"]?.first, 1002)
        XCTAssertEqual(frames["reserved_bits"]?.first, 1002)
        XCTAssertEqual(frames["unknown_opcode"]?.first, 1002)
        XCTAssertEqual(frames["fragmented_ping"]?.first, 1002)
        XCTAssertEqual(frames["stray_continuation"]?.first, 1002)
        XCTAssertEqual(frames["bad_utf8_hello"]?.first, 1007)
        XCTAssertEqual(frames["binary_hello"], [1008, "bad hello"])
        XCTAssertEqual(frames["huge_hello"], [1009, "frame too large"])
        XCTAssertEqual(result["pair_intact"] as? Bool, true)
        XCTAssertEqual(result["pair_intact_back"] as? Bool, true)
    }

    func testTheRelayServesTLSItselfAndSplicesOverWSS() throws {
        tearDown()
        let directory = try scratchDirectory()
        let (cert, key) = try TestCertificate.make(in: directory)
        try startRelay(database: ":memory:", ["--tls-cert", cert, "--tls-key", key])
        setenv("TETHER_TEST_CA", cert, 1)
        defer { unsetenv("TETHER_TEST_CA") }
        let result = try client("pair", scheme: "wss")
        XCTAssertEqual(result["phone_ok"] as? Bool, true)
        XCTAssertEqual(result["phone_to_mac_ok"] as? Bool, true)
        XCTAssertEqual(result["mac_to_phone_ok"] as? Bool, true)
        XCTAssertEqual(result["mac_close"] as? [AnyHashable], [1001, "peer gone"])
    }
}

extension RelayEndToEndTests {
    func testAttestationModePairsWithAppAttestAndRefusesEachBadStep() throws {
        tearDown()
        let directory = try scratchDirectory()
        let made = try PythonPeer.run(script: "appattest_fixture.py", arguments: [#"{"op":"root"}"#])
        XCTAssertEqual(made.status, 0, made.stderr)
        var root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(made.stdout.utf8)) as? [String: Any])
        root["app_id"] = "TEAMID.com.example.companion"
        root["origin"] = "https://relay.test"
        let fixture = directory.appendingPathComponent("root.json")
        try JSONSerialization.data(withJSONObject: root).write(to: fixture)
        try startRelay(database: directory.appendingPathComponent("relay.db").path,
                       ["--relay-origin", "https://relay.test", "--app-id", "TEAMID.com.example.companion",
                        "--appattest-root-pem", try XCTUnwrap(root["root_pem"] as? String), "--relay-log", "true"], local: false)
        let result = try client("attest_flow", [fixture.path])
        func pair(_ key: String) -> String { json(result[key]) }
        XCTAssertEqual(json(result["mac"]), #"{"ok":true}"#)
        XCTAssertEqual(pair("bad_attest"), #"[403,{"error":"attestation rejected","ok":false}]"#)
        XCTAssertEqual(pair("bad_attest_retry"), #"[403,{"error":"bad challenge","ok":false}]"#, "consumed by the failure")
        let attest = try XCTUnwrap(result["attest"] as? [Any])
        XCTAssertEqual(attest.first as? Int, 200)
        XCTAssertEqual(((attest.last as? [String: Any])?["ticket"] as? String)?.count, 32)
        XCTAssertEqual(pair("attest_replay"), #"[403,{"error":"bad challenge","ok":false}]"#)
        XCTAssertEqual(json(result["phone"]), #"{"ok":true}"#, "admitted by ticket")
        XCTAssertEqual(json(result["ticket_reused"]), #"{"error":"bad ticket","ok":false}"#)
        XCTAssertEqual(pair("no_assertion"), #"[403,{"error":"assertion required","ok":false}]"#)
        XCTAssertEqual(pair("other_key"), #"[403,{"error":"assertion rejected: assertion signature invalid","ok":false}]"#)
        XCTAssertEqual(pair("other_key_retry"), #"[403,{"error":"bad challenge","ok":false}]"#, "the challenge went with the failure")
        XCTAssertEqual(json(result["still_pairing"]), #"{"ok":true}"#, "the failures left the room in pairing mode")
        XCTAssertEqual(pair("register"), #"[200,{"ok":true}]"#, "the token survived the failures")
        XCTAssertEqual(json(result["after_unsigned"]), #"{"error":"signature required","ok":false}"#)
        XCTAssertEqual(json(result["after_signed"]), #"{"ok":true}"#)
        XCTAssertTrue(logLines().contains { $0.hasSuffix(" POST /attest -> 403 (rpIdHash (app id) mismatch)") }, "\(logLines())")
    }
}

extension RelayEndToEndTests {
    /// Issue 18: a request written with bare LF line ends is answered 400 at once, not held until
    /// the 30 s head timeout.
    func testABareLFRequestIsAnswered400AtOnce() throws {
        let script = """
        import socket, sys, time
        s = socket.create_connection(("127.0.0.1", \(port)))
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\\nHost: x\\n\\n")
        s.settimeout(5)
        answer = s.recv(200)
        print("%.3f %s" % (time.monotonic() - started, answer.split(b"\\r\\n")[0].decode()))
        """
        let (status, out, err) = try runProcess("/usr/bin/python3", ["-c", script], timeout: 10)
        XCTAssertEqual(status, 0, err)
        let parts = out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ", maxSplits: 1)
        XCTAssertEqual(parts.last.map(String.init), "HTTP/1.1 400 Bad Request", out)
        XCTAssertLessThan(Double(parts.first ?? "") ?? 99, 1.0, "answered at once: \(out)")
    }
}

extension RelayEndToEndTests {
    /// Issue 18: connections still sending their heads are capped at `RELAY_MAX_SOCKETS_PER_IP`
    /// per address, so one address cannot hold a thousand descriptors for the 30 s head timeout;
    /// other addresses are not affected.
    func testHeadsStillArrivingCountAgainstThePerIPCapAndPastItAreRefusedAtOnce() throws {
        // Refusals at accept spend the upgrade budget (the next test); this one is about the cap.
        try startRelay(database: ":memory:", ["--relay-ws-rate-limit", "1000"])
        let result = try client("slow_heads", ["200"])
        XCTAssertEqual(result["refused"] as? Int, 200 - 64, "\(result)")
        XCTAssertEqual(result["statuses"] as? [String], ["HTTP/1.1 429 Too Many Requests"])
        let other = result["other_address"] as? [String: Any]
        XCTAssertEqual(other?["ok"] as? [Bool], [true, true], "another address pairs meanwhile: \(result)")
        XCTAssertLessThan(other?["seconds"] as? Double ?? 99, 2)
        XCTAssertEqual(result["same_address_while_held"] as? [AnyHashable], [429, "too many connections"])
        XCTAssertEqual((result["same_address_after"] as? [String: Any])?["ok"] as? [Bool], [true, true], "the places came back: \(result)")
    }

    /// Issue 28 (relay.md §2.3): "the limiter in step 2 counts every upgrade that passes the gate,
    /// including those later refused in steps 3–5". One address holds its one socket, makes 119
    /// more upgrades at once (each refused `too many connections`, most of them at accept, before
    /// their heads are read), lets its socket go: the 121st upgrade of the minute is `rate limited`.
    func testUpgradesRefusedAtThePerIPCapStillSpendTheUpgradeBudget() throws {
        try startRelay(database: ":memory:", ["--relay-max-sockets-per-ip", "1"])
        let script = """
        import base64, os, socket, time
        port = \(port)
        room = os.urandom(32).hex()
        def send_upgrade():
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(("GET / HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n"
                       "Sec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\nx-relay-room: %s\\r\\n\\r\\n"
                       % (port, base64.b64encode(os.urandom(16)).decode(), room)).encode())
            return s
        def answer(s):
            s.settimeout(5)
            data = b""
            while b"\\r\\n\\r\\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\\r\\n\\r\\n")
            return head.split(b"\\r\\n")[0].decode().split(" ", 1)[-1] + " " + body.decode(errors="replace")
        held = send_upgrade()
        print(answer(held))
        attempts = [send_upgrade() for _ in range(119)]
        print(sorted(set(answer(s) for s in attempts)))
        for s in attempts:
            s.close()
        held.close()
        time.sleep(0.3)
        print(answer(send_upgrade()))
        """
        let (status, out, err) = try runProcess("/usr/bin/python3", ["-c", script], timeout: 30)
        XCTAssertEqual(status, 0, err)
        let lines = out.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, ["101 Switching Protocols ", "['429 Too Many Requests too many connections']", "429 Too Many Requests rate limited"])
    }
}

extension RelayEndToEndTests {
    /// relay.md §10 (§2.2 step 9): a GET or HEAD carrying a body is routed like any other request,
    /// so it gets 501 `not implemented` (the reference answers 500), its body is read off the
    /// connection, and the connection serves the next request.
    func testAGetOrHeadWithABodyIsRoutedNormallyTo501() throws {
        let script = """
        import json, socket
        room = "ab" * 32
        s = socket.create_connection(("127.0.0.1", \(port)))
        s.settimeout(5)
        pending = b""
        def ask(method, path, body):
            global pending
            s.sendall(("%s %s HTTP/1.1\\r\\nHost: x\\r\\nx-relay-room: %s\\r\\nContent-Length: %d\\r\\n\\r\\n" % (method, path, room, len(body))).encode() + body)
            while b"\\r\\n\\r\\n" not in pending:
                chunk = s.recv(4096)
                if not chunk:
                    return ["closed"]
                pending += chunk
            head, pending = pending.split(b"\\r\\n\\r\\n", 1)
            lines = head.decode().split("\\r\\n")
            headers = dict((k.strip().lower(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:]))
            length = 0 if method == "HEAD" else int(headers.get("content-length", "0"))
            while len(pending) < length:
                pending += s.recv(4096)
            body, pending = pending[:length], pending[length:]
            return [lines[0], headers.get("content-type"), headers.get("content-length"), body.decode()]
        print(json.dumps([ask("GET", "/attest", b"{}"), ask("HEAD", "/register", b"{}"), ask("POST", "/register", b"{}")]))
        """
        let (status, out, err) = try runProcess("/usr/bin/python3", ["-c", script], timeout: 15)
        XCTAssertEqual(status, 0, err)
        let answers = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String?]], out)
        XCTAssertEqual(answers.count, 3, out)
        XCTAssertEqual(answers.first, ["HTTP/1.1 501 Not Implemented", "text/plain;charset=UTF-8", "15", "not implemented"], "GET with a body")
        XCTAssertEqual(answers.dropFirst().first, ["HTTP/1.1 501 Not Implemented", "text/plain;charset=UTF-8", "15", ""],
                       "HEAD with a body: the head of the 501, no body")
        XCTAssertEqual(answers.last?.first, "HTTP/1.1 400 Bad Request", "the connection reads the next request where the body ended: \(out)")
        XCTAssertEqual(answers.last?.last, #"{"ok":false,"error":"missing verifier"}"#)
        XCTAssertFalse(logLines().contains { $0.contains("internal error") }, "no 500")
    }
}

extension RelayEndToEndTests {
    /// relay.md §6.8 and §10 (duplicate room contexts after boot): after a restart, a stored
    /// room first reached by three connections at the same moment (the mac's and the phone's
    /// upgrades and an `/attest/challenge`, each possibly on its own loop) has one context: both
    /// legs are admitted signed into it and spliced, and `relay_rooms_live` is 1.
    func testAfterARestartARoomHasOneContextHoweverItIsFirstReached() throws {
        process.interrupt()
        process.waitUntilExit()
        let database = try scratchDirectory().appendingPathComponent("relay.db").path
        try startRelay(database: database)
        let registered = try client("register")
        XCTAssertEqual(registered["status"] as? Int, 200)
        let room = try XCTUnwrap(registered["room"] as? String), secret = try XCTUnwrap(registered["secret"] as? String)
        process.interrupt()
        process.waitUntilExit()
        try startRelay(database: database)

        let result = try client("first_access", [room, secret])
        XCTAssertEqual(result["challenge"] as? Int, 200, "\(result)")
        XCTAssertEqual((result["mac"] as? [String: Any])?["ok"] as? Bool, true, "\(result)")
        XCTAssertEqual((result["phone"] as? [String: Any])?["ok"] as? Bool, true, "the phone found the mac in the same context: \(result)")
        XCTAssertEqual(result["spliced"] as? String, "010203")
        XCTAssertEqual(result["rooms_live"] as? [String], ["relay_rooms_live 1"], "one context for the room")
    }
}

/// The entry gate (relay.md §2.2, §2.3) and the transport (§2.1, §2.8, §2.10) rule by rule, each
/// request written byte for byte by `relay_client.py`.
extension RelayEndToEndTests {
    private func restart(_ extra: [String], host: String = "127.0.0.1") throws {
        tearDown()
        try startRelay(database: ":memory:", extra, host: host)
    }

    func testAnUpgradeOnAnyPathWithAnyHostIsServed() throws {
        let result = try client("any_path")
        XCTAssertEqual(result["status"] as? String, "HTTP/1.1 101 Switching Protocols")
        XCTAssertEqual(result["result"] as? [String: Bool], ["ok": true], "GET /any/path?x=1 with Host: other.example")
    }

    func testHTTPRequestsAreCountedOnceTheyPassTheGateEvenWhenRefusedLater() throws {
        try restart(["--relay-attest-rate-limit", "1"])
        let result = try client("http_counted")
        XCTAssertEqual(result["origin"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["bad_room"] as? [AnyHashable], [400, "bad room"])
        XCTAssertEqual(result["before"] as? [String], [], "neither gate refusal nor the scrape counted (the counter is hidden at zero)")
        XCTAssertEqual(result["attest"] as? [Int], [200, 429])
        XCTAssertEqual(result["unrouted"] as? [AnyHashable], [501, "not implemented"])
        XCTAssertEqual(result["after"] as? [String], ["relay_http_requests_total 3"], "the 429 and the 501 count; the scrapes do not")
    }

    func testRegisterAndDeleteHaveNoPerIPRateLimit() throws {
        try restart(["--relay-attest-rate-limit", "1"])
        let result = try client("unlimited_paths")
        XCTAssertEqual(result["/register"] as? [[AnyHashable]], Array(repeating: [400, "missing verifier"], count: 5))
        XCTAssertEqual(result["/delete"] as? [[AnyHashable]], Array(repeating: [403, "not established"], count: 5))
    }

    func testTheRelayNegotiatesNoExtensionAndNoSubprotocol() throws {
        let result = try client("no_extensions")
        XCTAssertEqual(result["status"] as? String, "HTTP/1.1 101 Switching Protocols")
        XCTAssertTrue(result["extensions"] is NSNull, "permessage-deflate offered, not taken: \(result)")
        XCTAssertTrue(result["protocol"] is NSNull, "the offered subprotocol is not echoed: \(result)")
        XCTAssertEqual(result["first_byte"] as? Int, 0x81, "FIN, RSV1 clear (uncompressed), text")
        XCTAssertEqual(result["challenge"] as? Bool, true)
    }

    func testMetricsIsAnsweredForAnyMethodOnItsExactPathOnly() throws {
        let result = try client("metrics_methods")
        XCTAssertEqual(result["post"] as? [AnyHashable], [200, "text/plain; version=0.0.4"])
        XCTAssertEqual(result["head"] as? [AnyHashable], [200, "text/plain; version=0.0.4", ""])
        XCTAssertEqual(result["trailing_slash"] as? [AnyHashable], [400, "bad room"], "/metrics/ is not /metrics: it meets the gate")
    }

    func testAnEmptyOriginIsForbiddenToo() throws {
        let result = try client("empty_origin")
        XCTAssertEqual(result["http"] as? [AnyHashable], [403, "forbidden"])
        XCTAssertEqual(result["upgrade"] as? [AnyHashable], [403, "forbidden"])
        // Counted by cause beside the reference's reason="gate": an Origin, not a bad room.
        let metrics = try runProcess("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/metrics"]).stdout
        XCTAssertTrue(metrics.contains("\nrelay_room_gate_refused_total{cause=\"origin\"} 1\n"), metrics)
        XCTAssertTrue(metrics.contains("\nrelay_room_gate_refused_total{cause=\"bad_room\"} 0\n"), metrics)
    }

    func testTheRoomHeaderIsTrimmedAndADuplicateIsABadRoom() throws {
        let result = try client("room_header_forms")
        XCTAssertEqual(result["duplicate"] as? [AnyHashable], [400, "bad room"], "two headers, even both the same valid room")
        XCTAssertEqual(result["trimmed"] as? Int, 200, "spaces and tabs around a valid room")
        XCTAssertEqual(result["missing"] as? [AnyHashable], [400, "bad room"])
    }

    func testEveryPathPrefixedAttestSharesOneBudgetWhateverItsMethod() throws {
        try restart(["--relay-attest-rate-limit", "3"])
        let result = try client("attest_prefix")
        let answers = try XCTUnwrap(result["answers"] as? [Any])
        XCTAssertEqual(answers.prefix(3).compactMap { $0 as? Int }, [400, 501, 501], "POST /attest, GET /attest/challenge, POST /attestX")
        XCTAssertEqual(answers.last as? [AnyHashable], [429, "rate limited"], "the three spent the budget of 3")
    }

    func testAnAbortedBodyIsAnsweredNothingAndAStreamedOneIsCappedAt64KiB() throws {
        let result = try client("bodies")
        XCTAssertEqual(result["aborted"] as? String, "", "10 of 1,000 declared bytes, then the client stopped: no answer")
        XCTAssertEqual(result["errors"] as? [String], [], "and no error counted (relay_http_errors_total stays hidden at zero)")
        XCTAssertEqual(result["streamed"] as? [AnyHashable], [413, "payload too large"], "a chunked body past 65,536 bytes")
    }

    func testEveryUnroutedMethodOrPathIs501WithItsContentType() throws {
        let result = try client("unrouted")
        let notImplemented = [501, "text/plain;charset=UTF-8", "not implemented"] as [AnyHashable]
        for name in ["get", "slash", "upper"] { XCTAssertEqual(result[name] as? [AnyHashable], notImplemented, name) }
    }

    func testAGetWithABodyIsRoutedNormally() throws {
        let result = try client("unrouted")
        XCTAssertEqual(result["get_with_body"] as? [AnyHashable], [501, "text/plain;charset=UTF-8", "not implemented"],
                       "GET /register carrying {}: 501 like any GET, not the reference's 500")
    }

    func testRoomEndpointsAnswerJSONWhateverTheRequestContentTypeAndOnlyToPOST() throws {
        let result = try client("room_json")
        XCTAssertEqual(result["challenge"] as? [AnyHashable], [200, "application/json"])
        XCTAssertEqual(result["delete"] as? [AnyHashable], [403, "not established", "application/json"])
        XCTAssertEqual(result["register_text_plain"] as? [AnyHashable], [403, "token required", "application/json"],
                       "a JSON body sent as text/plain is parsed all the same")
        XCTAssertEqual(result["get_register"] as? [AnyHashable], [501, "not implemented"])
    }

    func testTheGateIsCheckedBeforeTheHandshake() throws {
        let result = try client("gate_first")
        XCTAssertEqual(result["origin_bad_version"] as? [AnyHashable], [403, "forbidden"], "Origin and version 99: the gate answers")
        XCTAssertEqual(result["bad_room_bad_key"] as? [AnyHashable], [400, "bad room"], "a bad room and a bad key: the room is named")
        XCTAssertEqual(result["bad_version"] as? [AnyHashable], [400, "13, 8"], "past the gate, the handshake's own answer")
    }

    func testAHelloSentWithTheUpgradeIsNotLost() throws {
        let result = try client("early_hello")
        XCTAssertEqual(result["status"] as? String, "HTTP/1.1 101 Switching Protocols")
        XCTAssertEqual(result["challenge"] as? Bool, true, "the Hello in the upgrade's own segment is answered with its challenge")
    }

    func testAnAdmittedSocketThatStopsAnsweringPingsIsDroppedAndItsPeerHearsPeerGone() throws {
        try restart(["--relay-keepalive-ms", "300"])
        let result = try client("keepalive_admitted")
        XCTAssertEqual(result["mac_ok"] as? Bool, true)
        XCTAssertEqual(result["phone_ok"] as? Bool, true)
        let opcodes = try XCTUnwrap(result["phone_opcodes"] as? [Int])
        XCTAssertFalse(opcodes.isEmpty, "pinged first")
        XCTAssertTrue(opcodes.allSatisfy { $0 == 0x9 }, "pings only, then TCP dropped with no close frame: \(opcodes)")
        XCTAssertLessThan(result["seconds"] as? Double ?? 99, 3)
        XCTAssertEqual(result["mac_close"] as? [AnyHashable], [1001, "peer gone"])
        let log = logLines()
        XCTAssertTrue(log.contains { $0.contains(" keepalive no-pong; terminating role=phone lived=") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains(" disconnect initiator=remote role=phone state=admitted code=1006 lived=") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains(" disconnect initiator=relay role=mac state=admitted code=1001 reason=peer gone lived=") }, "\(log)")
    }

    func testDataFramesDoNotCountAsLiveness() throws {
        try restart(["--relay-keepalive-ms", "300"])
        let result = try client("data_not_liveness")
        XCTAssertEqual(result["admitted"] as? Bool, true)
        XCTAssertGreaterThan(result["sent"] as? Int ?? 0, 2, "a binary frame every 100 ms")
        let opcodes = try XCTUnwrap(result["opcodes"] as? [Int])
        XCTAssertTrue(!opcodes.isEmpty && opcodes.allSatisfy { $0 == 0x9 }, "pings only, no close frame: \(opcodes)")
        XCTAssertLessThan(result["seconds"] as? Double ?? 99, 2, "dropped within 2 s although it kept sending")
        XCTAssertTrue(logLines().contains { $0.contains(" keepalive no-pong; terminating role=mac lived=") }, "\(logLines())")
    }

    func testPublicMetricsRefusesEveryForwardingHeaderAndAcceptsIPv6LoopbackAndAnyMethod() throws {
        let forbidden = [403, "forbidden"] as [AnyHashable]
        for host in ["127.0.0.1", "::1"] {
            if host != "127.0.0.1" { try restart([], host: host) }
            let result = try client("forwarding_headers", host: host == "::1" ? "[::1]" : host)
            for name in ["X-Real-IP", "Forwarded", "True-Client-IP", "X-Client-IP"] {
                XCTAssertEqual(result[name] as? [AnyHashable], forbidden, "\(name) from \(host)")
            }
            XCTAssertEqual(result["plain"] as? Int, 200, "a direct scrape from \(host)")
            XCTAssertEqual(result["post"] as? Int, 200, "POST /metrics from \(host)")
        }
    }
}
