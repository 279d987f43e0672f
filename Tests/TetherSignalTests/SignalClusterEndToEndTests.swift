import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// Two real `tether signal` nodes on one PostgreSQL registry (`SIGNAL_DB`), driven by the
/// independent client (Tests/Peers/signal_client.py `cluster-*`): signals cross between nodes
/// unchanged and in order, presence sees the other node's IDs, a duplicate live ID is refused
/// across nodes, and a node killed with -9 frees its IDs once its lease lapses.
final class SignalClusterEndToEndTests: XCTestCase {
    static let secret = "cluster-secret-for-the-tests-0123456789"
    static let leaseTTLms = 3_000

    private func node(_ database: String) throws -> (ServiceProcess, URL, UInt16) {
        let clusterPort = RelayProcess.freePort()   // known before start: the node is told its own cluster URL
        let node = try ServiceProcess(TetherBinary.url, ["signal", "--local", "--signal-port", "0"], environment: [
            "SIGNAL_DB": database, "SIGNAL_NODE_URL": "ws://127.0.0.1:\(clusterPort)/cluster", "SIGNAL_CLUSTER_PORT": String(clusterPort),
            "SIGNAL_CLUSTER_SECRET": Self.secret, "SIGNAL_LEASE_TTL_MS": String(Self.leaseTTLms),
        ], expecting: "signal: listening on ")
        return (node, URL(string: "ws://127.0.0.1:\(node.port)/signal")!, clusterPort)
    }

    /// A PostgreSQL server of the test's own and two nodes sharing a database on it.
    private struct Cluster {
        let server: PostgresServer
        let first: (process: ServiceProcess, url: URL, clusterPort: UInt16)
        let second: (process: ServiceProcess, url: URL, clusterPort: UInt16)

        func stop() {
            first.process.stop()
            second.process.stop()
            server.shutdown()
        }
    }

    private func twoNodes() throws -> Cluster {
        guard PostgresServer.isInstalled else { throw XCTSkip("PostgreSQL is not installed (scripts/install-deps)") }
        let server = try PostgresServer()
        do {
            let database = try server.createDatabase()
            return Cluster(server: server, first: try node(database), second: try node(database))
        } catch {
            server.shutdown()
            throw error
        }
    }

    func testTwoNodesForwardSignalsShareIDsAndFreeADeadNodesIDsWhenItsLeaseLapses() throws {
        let cluster = try twoNodes()
        defer { cluster.stop() }
        let (server, first, firstURL) = (cluster.server, cluster.first.process, cluster.first.url)
        let (secondURL, secondCluster) = (cluster.second.url, cluster.second.clusterPort)

        // The cluster listener takes only a node presenting the shared secret.
        for (header, status) in [("Bearer wrong-secret-wrong-secret-wrong-secret", "401"), ("", "401"), ("Bearer \(Self.secret)", "101")] {
            let (_, answer, _) = try runProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                                                                   "-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13",
                                                                   "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Authorization: \(header)",
                                                                   "http://127.0.0.1:\(secondCluster)/cluster"])
            XCTAssertEqual(answer, status, header)
        }

        let (status, output) = try ServiceProcess.runPeer("signal_client.py", [
            "--url", firstURL.absoluteString, "--url2", secondURL.absoluteString,
            "--scenario", "cluster-forward", "--scenario", "cluster-presence", "--scenario", "cluster-duplicate",
        ])
        XCTAssertEqual(output, "PASS cluster-forward\nPASS cluster-presence\nPASS cluster-duplicate\n")
        XCTAssertEqual(status, 0, output)

        // An ID held on the first node, which is then killed without a word to anyone.
        let key = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let holder = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("signal_client.py"), "--url", firstURL.absoluteString,
                                                                "--scenario", "cluster-hold", "--key-hex", key], expecting: "HELD")
        defer { holder.stop() }
        XCTAssertEqual(try server.query("SELECT count(*) FROM signal_registrations", database: "tether_1"), "1")
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        let (reclaimed, reclaim) = try ServiceProcess.runPeer("signal_client.py", ["--url", secondURL.absoluteString, "--scenario", "cluster-reclaim", "--key-hex", key])
        XCTAssertEqual(reclaimed, 0, reclaim)
        let seconds = reclaim.split(separator: "\n").first { $0.hasPrefix("RECLAIMED after ") }
            .flatMap { Double($0.dropFirst("RECLAIMED after ".count).split(separator: " ")[0]) }
        let waited = try XCTUnwrap(seconds, reclaim)
        XCTAssertLessThanOrEqual(waited, Double(Self.leaseTTLms) / 1000 + 2, "freed within the lease and a renewal")
        XCTAssertTrue(reclaim.contains("PASS cluster-reclaim"), reclaim)
    }

    /// A node that stood still past its lease (SIGSTOP: a paused VM, a long GC) comes back to find
    /// its IDs freed and perhaps claimed on the other node: it ends every registration it held
    /// `unavailable` (1013) at its first renewal, so an ID is never live on two nodes.
    func testANodeThatStoodStillPastItsLeaseEndsItsRegistrationsWhenItResumes() throws {
        let cluster = try twoNodes()
        defer { cluster.stop() }
        let (first, firstURL, secondURL) = (cluster.first.process, cluster.first.url, cluster.second.url)

        let key = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let holder = try ServiceProcess(ServiceProcess.python, [ServiceProcess.peer("signal_client.py"), "--url", firstURL.absoluteString,
                                                                "--scenario", "cluster-hold", "--key-hex", key], expecting: "HELD", capturing: true)
        defer { holder.stop() }
        kill(first.process.processIdentifier, SIGSTOP)
        defer { kill(first.process.processIdentifier, SIGCONT) }
        let (reclaimed, reclaim) = try ServiceProcess.runPeer("signal_client.py", ["--url", secondURL.absoluteString, "--scenario", "cluster-reclaim", "--key-hex", key])
        XCTAssertEqual(reclaimed, 0, reclaim)
        XCTAssertTrue(reclaim.contains("PASS cluster-reclaim"), reclaim)

        kill(first.process.processIdentifier, SIGCONT)
        let resumed = Date()
        _ = Eventually.holds(within: 5, every: 0.02) { holder.capturedOutput.contains("CLOSED") }
        XCTAssertTrue(holder.capturedOutput.contains("CLOSED 1013 unavailable"), "the stale registration ended: \(holder.capturedOutput)")
        XCTAssertLessThan(Date().timeIntervalSince(resumed), 3, "at the first renewal after the resume")
    }
}
