import Foundation
@testable import TetherRelay
import TetherService
import TetherTestSupport
import XCTest

final class RelayConfigurationTests: XCTestCase {
    private let production = ["RELAY_ORIGIN": "https://relay.example.com", "APP_ID": "H7V7XYVQ7D.com.googlecode.iterm2.companion"]

    private func load(_ env: [String: String], _ args: [String] = []) throws -> (RelayConfiguration, [String]) {
        try RelayConfiguration.load(environment: env, arguments: args)
    }

    private func assertRefused(_ env: [String: String], _ args: [String] = [], naming variable: String,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try load(env, args), file: file, line: line) {
            XCTAssertEqual(($0 as? RelayConfigurationError)?.variable, variable, "\($0)", file: file, line: line)
        }
    }

    /// A reconnect storm writes nothing for rooms joined in the last hours: the stored activity is
    /// refreshed at 1% of the idle TTL (7.2 h of the default 30 days), however the TTL is set.
    func testTheStoredActivityIsRefreshedAtOnePercentOfTheIdleTTL() throws {
        XCTAssertEqual(RelayServer.machineContext(try load(production).0).configuration.activityGranularity, .seconds(25_920))
        let short = try load(production.merging(["RELAY_ESTABLISHED_IDLE_TTL_MS": "60000"]) { $1 }).0
        XCTAssertEqual(RelayServer.machineContext(short).configuration.activityGranularity, .milliseconds(600))
    }

    /// A socket cap the descriptor limit cannot honour is named at start.
    func testASocketCapAboveTheDescriptorLimitIsWarnedAboutAtStart() {
        XCTAssertNil(RelayServer.descriptorWarning(maxTotalSockets: 200_000, descriptorLimit: 1_048_576))
        XCTAssertNil(RelayServer.descriptorWarning(maxTotalSockets: 200_000, descriptorLimit: -1), "unlimited")
        XCTAssertEqual(RelayServer.descriptorWarning(maxTotalSockets: 200_000, descriptorLimit: 65_536),
                       "relay: RELAY_MAX_TOTAL_SOCKETS=200000 needs 200256 descriptors but the limit is 65536: "
                       + "sockets past it fail at accept instead of 503 capacity; raise LimitNOFILE (ulimit -n) or lower the cap")
    }

    /// A lease shorter than three renewals lapses on one late renewal: refused at start.
    /// A v1 cluster node: its map name from RELAY_NODE_URL, and everything it needs or a refusal
    /// naming what is missing.
    func testAV1ClusterNodeNeedsItsURLASharedDatabaseAListenerAndALongSecret() throws {
        let cluster = production.merging(["RELAY_DB": "postgres://tether@db.internal/tether", "RELAY_NODE_URL": "http://10.0.0.11:8788",
                                          "RELAY_CLUSTER_PORT": "8788", "RELAY_CLUSTER_HOST": "10.0.0.11",
                                          "RELAY_CLUSTER_SECRET": String(repeating: "s", count: 32)]) { $1 }
        let settings = try XCTUnwrap(try load(cluster).0.cluster)
        XCTAssertEqual(settings.node, "10.0.0.11:8788")
        XCTAssertEqual(settings.host, "10.0.0.11")
        XCTAssertEqual(settings.port, 8788)
        XCTAssertNil(try load(production).0.cluster, "off unless RELAY_NODE_URL is set")
        XCTAssertEqual(try load(cluster.merging(["RELAY_NODE_URL": "http://[::1]:8788/"]) { $1 }).0.cluster?.node, "[::1]:8788")
        for url in ["https://10.0.0.11:8788", "http://10.0.0.11", "http://10.0.0.11:8788/cluster", "http://Node1:8788", "http://10.0.0.11:0"] {
            assertRefused(cluster.merging(["RELAY_NODE_URL": url]) { $1 }, naming: "RELAY_NODE_URL")
        }
        assertRefused(cluster.merging(["RELAY_DB": "relay.db"]) { $1 }, naming: "RELAY_DB")
        assertRefused(cluster.filter { $0.key != "RELAY_CLUSTER_PORT" }, naming: "RELAY_CLUSTER_PORT")
        assertRefused(cluster.merging(["RELAY_CLUSTER_SECRET": String(repeating: "s", count: 31)]) { $1 }, naming: "RELAY_CLUSTER_SECRET")
        assertRefused(cluster.filter { $0.key != "RELAY_CLUSTER_SECRET" }, naming: "RELAY_CLUSTER_SECRET")
        assertRefused(cluster.merging(["RELAY_CLUSTER_SECRET": String(repeating: "s", count: 32) + "\r\nx: y"]) { $1 }, naming: "RELAY_CLUSTER_SECRET")
    }

    func testALeaseShorterThanThreeRenewalsIsRefused() throws {
        assertRefused(production.merging(["RELAY_LEASE_TTL_MS": "2999"]) { $1 }, naming: "RELAY_LEASE_TTL_MS")
        XCTAssertThrowsError(try load(production.merging(["RELAY_LEASE_TTL_MS": "2999"]) { $1 })) { error in
            XCTAssertTrue("\(error)".contains("must be at least 3000, not 2999"), "\(error)")
        }
        XCTAssertEqual(try load(production.merging(["RELAY_LEASE_TTL_MS": "3000"]) { $1 }).0.leaseTTLms, 3_000)
    }

    func testReferenceDefaultsUnderTheReferenceNames() throws {
        let (c, _) = try load(production)
        XCTAssertEqual(c.host, "127.0.0.1")
        XCTAssertEqual(c.port, 8787)
        XCTAssertEqual(c.databasePath, "relay.db")
        XCTAssertTrue(c.attestationRequired)
        XCTAssertEqual(c.dailyByteQuota, 536_870_912)
        XCTAssertEqual(c.establishedIdleTTLms, 2_592_000_000)
        XCTAssertEqual(c.maxRooms, 200_000)
        XCTAssertEqual(c.maxSocketsPerIP, 64)
        XCTAssertEqual(c.maxTotalSockets, 200_000)
        XCTAssertEqual(c.keepaliveMs, 30_000)
        XCTAssertEqual(c.wsRateLimit, 120)
        XCTAssertEqual(c.attestRateLimit, 30)
        XCTAssertEqual(c.maxFramesPerSecond, 500)
        XCTAssertEqual(c.metricsPushMs, 60_000)
        XCTAssertEqual(c.clientIP, ClientIPResolver())
    }

    func testSwitchesAreTrueOrFalseAndAnythingElseIsRefusedNotReadAsOff() throws {
        for spelling in ["yes", "1", "TRUE", "on", "True"] {
            assertRefused(production.merging(["RELAY_LOG": spelling]) { $1 }, naming: "RELAY_LOG")
            assertRefused(production.merging(["RELAY_TRUST_PROXY": spelling]) { $1 }, naming: "RELAY_TRUST_PROXY")
            assertRefused(production.merging(["RELAY_TRUST_CLOUDFLARE": spelling]) { $1 }, naming: "RELAY_TRUST_CLOUDFLARE")
        }
        XCTAssertTrue(try load(production.merging(["RELAY_LOG": "true"]) { $1 }).0.verboseLog)
        XCTAssertFalse(try load(production.merging(["RELAY_LOG": "false"]) { $1 }).0.verboseLog)
        assertRefused(production.merging(["RELAY_KEEPALIVE_MS": "1"]) { $1 }, naming: "RELAY_KEEPALIVE_MS")
        XCTAssertEqual(try load(production.merging(["RELAY_KEEPALIVE_MS": "0"]) { $1 }).0.keepaliveMs, 30_000)
        XCTAssertEqual(try load(production.merging(["RELAY_KEEPALIVE_MS": "100"]) { $1 }).0.keepaliveMs, 100)
    }

    func testBindAddressesAreNumericAndANameIsRefusedAtStartNotAtBind() throws {
        for name in ["localhost", "relay.example.com", "127.0.0.1:8787", ""] where !name.isEmpty {
            assertRefused(production.merging(["RELAY_HOST": name]) { $1 }, naming: "RELAY_HOST")
            assertRefused(production.merging(["RELAY_ADMIN_HOST": name]) { $1 }, naming: "RELAY_ADMIN_HOST")
        }
        assertRefused(["RELAY_HOST": "localhost"], ["--local"], naming: "RELAY_HOST")
        for address in ["127.0.0.1", "::1", "0.0.0.0", "::"] {
            XCTAssertEqual(try load(production.merging(["RELAY_HOST": address]) { $1 }).0.host, address)
        }
    }

    func testAReferenceEnvironmentFileWorksUnchanged() throws {
        let file = """
        # /etc/iterm2-companion-relay.env
        RELAY_HOST=127.0.0.1
        RELAY_PORT=8787
        RELAY_ORIGIN=https://relay.iterm2.com
        APP_ID="H7V7XYVQ7D.com.googlecode.iterm2.companion"
        RELAY_DAILY_BYTE_QUOTA=8589934592
        RELAY_TRUST_PROXY=true
        RELAY_METRICS_PUSH_URL=https://monitor.example.com/ingest
        RELAY_METRICS_PUSH_TOKEN='secret'
        RELAY_METRICS_PUSH_MS=240000
        """
        let (c, notes) = try load(RelayConfiguration.parseEnvironmentFile(file))
        XCTAssertEqual(c.origin, "https://relay.iterm2.com")
        XCTAssertEqual(c.appID, "H7V7XYVQ7D.com.googlecode.iterm2.companion")
        XCTAssertEqual(c.dailyByteQuota, 8_589_934_592)
        XCTAssertTrue(c.clientIP.trustProxy)
        XCTAssertEqual(c.metricsPushToken, "secret")
        XCTAssertEqual(c.metricsPushMs, 240_000)
        XCTAssertTrue(notes.isEmpty, "trusting the proxy silences the loopback warning")
    }

    /// relay.md §4.5: only the exact string `false` opens attestation. Every switch of every
    /// service takes exactly `true` or `false` (the operator's issue): any other spelling stops
    /// start-up naming the variable, so a typo can neither open the relay nor pass unnoticed.
    func testOnlyTheExactStringFalseOpensAttestation() throws {
        XCTAssertFalse(try load(["RELAY_ORIGIN": "https://r.example", "ATTEST_REQUIRED": "false"]).0.attestationRequired)
        XCTAssertTrue(try load(production.merging(["ATTEST_REQUIRED": "true"]) { $1 }).0.attestationRequired)
        for value in ["FALSE", "0", "no", "False", " false", "off", "disabled", "none", "1", "yes"] {
            assertRefused(production.merging(["ATTEST_REQUIRED": value]) { $1 }, naming: "ATTEST_REQUIRED")
        }
        assertRefused(["RELAY_ORIGIN": "https://r.example"], naming: "APP_ID")
    }

    func testOriginMustBeABareHTTPSOrigin() {
        assertRefused([:], naming: "RELAY_ORIGIN")
        for bad in ["http://relay.example.com", "https://relay.example.com/", "https://relay.example.com/path", "https://u@relay.example.com",
                    "https://relay.example.com?x", "relay.example.com", "HTTPS://relay.example.com"] {
            assertRefused(production.merging(["RELAY_ORIGIN": bad]) { $1 }, naming: "RELAY_ORIGIN")
        }
        XCTAssertNoThrow(try load(production.merging(["RELAY_ORIGIN": "https://relay.example.com:8443"]) { $1 }))
    }

    func testInvalidNumbersStopStartUpNamingTheVariable() {
        assertRefused(production.merging(["RELAY_ESTABLISHED_IDLE_TTL_MS": "-5"]) { $1 }, naming: "RELAY_ESTABLISHED_IDLE_TTL_MS")
        assertRefused(production.merging(["RELAY_DAILY_BYTE_QUOTA": "8GiB"]) { $1 }, naming: "RELAY_DAILY_BYTE_QUOTA")
        assertRefused(production.merging(["RELAY_DAILY_BYTE_QUOTA": "0"]) { $1 }, naming: "RELAY_DAILY_BYTE_QUOTA")
        assertRefused(production.merging(["RELAY_TRUSTED_HOPS": "1.5"]) { $1 }, naming: "RELAY_TRUSTED_HOPS")
        assertRefused(production.merging(["RELAY_PORT": "70000"]) { $1 }, naming: "RELAY_PORT")
        assertRefused(production.merging(["PORT": "x"]) { $1 }, naming: "PORT")
        assertRefused(production.merging(["RELAY_MAX_ROOMS": "-1"]) { $1 }, naming: "RELAY_MAX_ROOMS")
        assertRefused(production.merging(["RELAY_WS_RATE_LIMIT": "-1"]) { $1 }, naming: "RELAY_WS_RATE_LIMIT")
        assertRefused(production.merging(["APPATTEST_ENV": "staging"]) { $1 }, naming: "APPATTEST_ENV")
        assertRefused(production.merging(["RELAY_TLS_CERT": #filePath]) { $1 }, naming: "RELAY_TLS_KEY")
    }

    func testHalfAMetricsPushConfigurationWarnsAndLeavesPushOff() throws {
        let (c, notes) = try load(production.merging(["RELAY_METRICS_PUSH_URL": "https://m.example"]) { $1 })
        XCTAssertNil(c.metricsPushURL)
        XCTAssertNil(c.metricsPushToken)
        XCTAssertTrue(notes.contains { $0.hasPrefix("warning: metrics push needs both") }, "\(notes)")
    }

    func testZeroCapsMeanTheDefaultAndZeroLimitsMeanOff() throws {
        let (c, _) = try load(production.merging(["RELAY_MAX_ROOMS": "0", "RELAY_WS_RATE_LIMIT": "0", "RELAY_ATTEST_RATE_LIMIT": "0",
                                                  "RELAY_MAX_FRAMES_PER_SEC": "0"]) { $1 })
        XCTAssertEqual(c.maxRooms, 200_000)
        XCTAssertEqual(c.wsRateLimit, 0)
        XCTAssertEqual(c.attestRateLimit, 0)
        XCTAssertEqual(c.maxFramesPerSecond, 0)
    }

    /// relay.md §2.5: "Tether: exposes both limits (count and window) as settings with these
    /// defaults" — the windows default to 60 s and reach the gate's limiters.
    func testBothPerIPLimitersWindowsAreSettingsThatReachTheGate() throws {
        let (defaults, _) = try load(production)
        XCTAssertEqual(RelayServer.gateLimits(defaults).socketRate, .init(limit: 120, window: .milliseconds(60_000)))
        XCTAssertEqual(RelayServer.gateLimits(defaults).requestLimits[RelayServer.attestLimiter]?.rate, .init(limit: 30, window: .milliseconds(60_000)))
        let (c, _) = try load(production.merging(["RELAY_WS_RATE_LIMIT": "5", "RELAY_WS_RATE_WINDOW_MS": "1500"]) { $1 },
                              ["--relay-attest-rate-limit", "3", "--relay-attest-rate-window-ms=2500"])
        let limits = RelayServer.gateLimits(c)
        XCTAssertEqual(limits.socketRate, .init(limit: 5, window: .milliseconds(1_500)))
        XCTAssertEqual(limits.requestLimits[RelayServer.attestLimiter]?.rate, .init(limit: 3, window: .milliseconds(2_500)))
        assertRefused(production.merging(["RELAY_WS_RATE_WINDOW_MS": "0"]) { $1 }, naming: "RELAY_WS_RATE_WINDOW_MS")
        assertRefused(production.merging(["RELAY_ATTEST_RATE_WINDOW_MS": "1m"]) { $1 }, naming: "RELAY_ATTEST_RATE_WINDOW_MS")
    }

    /// relay.md §2.6: the socket caps under their reference names; 0 (not a positive number)
    /// gives the default.
    func testSocketCapsAreReadFromTheirEnvironmentNames() throws {
        let (c, _) = try load(production.merging(["RELAY_MAX_SOCKETS_PER_IP": "10", "RELAY_MAX_TOTAL_SOCKETS": "5"]) { $1 })
        XCTAssertEqual(c.maxSocketsPerIP, 10)
        XCTAssertEqual(c.maxTotalSockets, 5)
        let (zero, _) = try load(production.merging(["RELAY_MAX_SOCKETS_PER_IP": "0", "RELAY_MAX_TOTAL_SOCKETS": "0"]) { $1 })
        XCTAssertEqual(zero.maxSocketsPerIP, 64)
        XCTAssertEqual(zero.maxTotalSockets, 200_000)
        let limits = RelayServer.gateLimits(c)
        XCTAssertEqual(limits.maxSocketsPerIP, 10, "and they reach the gate")
        XCTAssertEqual(limits.maxTotalSockets, 5)
    }

    /// relay.md §4.5: an empty ATTEST_REQUIRED (an env-file's `ATTEST_REQUIRED=`) is unset, and
    /// unset means required.
    func testAnEmptyAttestRequiredStillMeansRequired() throws {
        XCTAssertTrue(try load(production.merging(["ATTEST_REQUIRED": ""]) { $1 }).0.attestationRequired)
    }

    /// A `--local` relay serving TLS from certificate files advertises the scheme it speaks, so
    /// the Mac's pairing link and its advice work.
    func testALocalRelayServingTLSAdvertisesAnHTTPSOrigin() throws {
        let (plain, _) = try load([:], ["--local", "--relay-port", "8787"])
        XCTAssertEqual(plain.origin, "http://127.0.0.1:8787")
        let (tls, notes) = try load([:], ["--local", "--relay-port", "8443", "--tls-cert", #filePath, "--tls-key", #filePath])
        XCTAssertEqual(tls.origin, "https://127.0.0.1:8443")
        XCTAssertTrue(notes.contains { $0.contains("origin https://127.0.0.1:8443") }, "\(notes)")
        XCTAssertEqual(tls.bound(to: 9443).origin, "https://127.0.0.1:9443")
    }

    /// ACME names domains: an address is refused naming the way to certify one, and a domain list
    /// that leaves out the origin's host is a warning (clients of that origin would be refused).
    func testACMERefusesAnAddressAndWarnsWhenTheOriginIsNotAmongItsDomains() throws {
        for address in ["192.0.2.1", "2001:db8::1"] {
            assertRefused(production.merging(["RELAY_ACME_DOMAIN": address]) { $1 }, naming: "RELAY_ACME_DOMAIN")
        }
        let (_, notes) = try load(production.merging(["RELAY_ACME_DOMAIN": "other.example.com", "RELAY_ACME_DIR": NSTemporaryDirectory()]) { $1 })
        XCTAssertTrue(notes.contains("warning: RELAY_ACME_DOMAIN (other.example.com) does not name RELAY_ORIGIN's host relay.example.com: clients connecting to https://relay.example.com will be refused the certificate"), "\(notes)")
        let (named, quiet) = try load(production.merging(["RELAY_ACME_DOMAIN": "relay.example.com", "RELAY_ACME_DIR": NSTemporaryDirectory()]) { $1 },
                                      ["--acme-http-port", "8080"])
        XCTAssertEqual(named.acme?.httpPort, 8080, "--acme-http-port works as --acme-domain does")
        XCTAssertFalse(quiet.contains { $0.contains("RELAY_ACME_DOMAIN") }, "\(quiet)")
    }

    func testFlagsOverrideTheEnvironment() throws {
        // Certificate files are checked at start-up, so two that exist.
        let certificate = #filePath, key = Vectors.packageRoot().appendingPathComponent("Package.swift").path
        let (c, _) = try load(production.merging(["RELAY_PORT": "9000"]) { $1 },
                              ["--relay-port", "9100", "--relay-max-sockets-per-ip=10", "--tls-cert", certificate, "--tls-key=\(key)"])
        XCTAssertEqual(c.port, 9100)
        XCTAssertEqual(c.maxSocketsPerIP, 10)
        XCTAssertEqual(c.tlsCertificatePath, certificate)
        XCTAssertEqual(c.tlsKeyPath, key)
        assertRefused(production, ["--no-such-flag"], naming: "--no-such-flag")
        assertRefused(production, ["--relay-port"], naming: "RELAY_PORT")
    }

    func testLocalModeNeedsNothingAndStaysOnLoopback() throws {
        let (c, notes) = try load([:], ["--local"])
        XCTAssertFalse(c.attestationRequired)
        XCTAssertEqual(c.origin, "http://127.0.0.1:8787")
        XCTAssertEqual(c.host, "127.0.0.1")
        XCTAssertTrue(notes.contains { $0.contains("local mode") && $0.contains("open admission") })
        assertRefused(["RELAY_HOST": "0.0.0.0"], ["--local"], naming: "RELAY_HOST")
        XCTAssertEqual(try load([:], ["--local", "--relay-port", "9300"]).0.origin, "http://127.0.0.1:9300")
    }

    func testLoopbackWithoutATrustFlagWarns() throws {
        XCTAssertTrue(try load(production).1.contains { $0.contains("RELAY_TRUST_PROXY") })
        XCTAssertTrue(try load(production.merging(["RELAY_HOST": "0.0.0.0"]) { $1 }).1.isEmpty)
    }

    func testAShardMapFileIsValidatedAtStartAndAMapWithoutThisNodeWarns() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("map-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"version":3,"ranges":[{"low":0,"high":65535,"host":"relay.example.com"}]}"#.utf8).write(to: file)
        var env = production
        env["RELAY_SHARD_MAP"] = file.path
        let (c, notes) = try load(env)
        XCTAssertEqual(c.shardMap?.version, 3)
        XCTAssertFalse(notes.contains { $0.contains("RELAY_SHARD_MAP") })
        env["RELAY_ORIGIN"] = "https://relay2.example.com"
        XCTAssertTrue(try load(env).1.contains { $0.contains("RELAY_SHARD_MAP gives this node (relay2.example.com, from RELAY_ORIGIN) no bucket") })
        try Data(#"{"version":3,"ranges":[{"low":0,"high":65534,"host":"relay.example.com"}]}"#.utf8).write(to: file)
        assertRefused(env, naming: "RELAY_SHARD_MAP")
        assertRefused(production, ["--relay-shard-map", "/nonexistent/map.json"], naming: "RELAY_SHARD_MAP")
    }

    func testAnAppAttestRootThatIsNotPEMStopsStartUpAndEscapedNewlinesAreRead() throws {
        assertRefused(production.merging(["APPATTEST_ROOT_PEM": "not a certificate"]) { $1 }, naming: "APPATTEST_ROOT_PEM")
        let pem = try String(contentsOf: try Vectors.url("app-attest/Apple_App_Attestation_Root_CA.pem"), encoding: .utf8)
        let oneLine = pem.replacingOccurrences(of: "\n", with: "\\n")
        XCTAssertEqual(try load(production.merging(["APPATTEST_ROOT_PEM": oneLine]) { $1 }).0.appAttestRootPEM, pem)
    }

    func testHelpDocumentsEverySetting() {
        let help = RelayConfiguration.helpText
        for setting in RelaySetting.all {
            XCTAssertTrue(help.contains(setting.name), setting.name)
            XCTAssertTrue(help.contains(setting.flag), setting.flag)
        }
        XCTAssertTrue(help.contains("--local"))
    }
}
