import Foundation
import TetherService
import TetherSignal
import TetherTestSupport
import XCTest

/// signaling.md §13 and §13.1: names, defaults, lists, booleans and refusals at start-up.
final class SignalConfigurationTests: XCTestCase {
    static let begin = "<!-- BEGIN generated: tether signal --help-markdown (SignalConfigurationTests fails when stale) -->\n"

    func refusal(_ environment: [String: String], _ arguments: [String] = []) -> String? {
        do {
            _ = try SignalConfiguration.load(environment: environment, arguments: arguments)
            return nil
        } catch {
            return error.variable
        }
    }

    func testACMEReadsUnderTheSignalPrefix() throws {
        let (c, _) = try SignalConfiguration.load(environment: ["SIGNAL_ACME_DOMAIN": "signal.example.com"], arguments: [])
        XCTAssertEqual(c.acme?.domains, ["signal.example.com"])
        XCTAssertEqual(c.acme?.httpPort, 80)
        XCTAssertEqual(c.acme?.directoryURL, "https://acme-v02.api.letsencrypt.org/directory")
    }

    func testTheDefaultsAreTheSpecifiedOnes() throws {
        let (c, _) = try SignalConfiguration.load(environment: [:], arguments: [])
        XCTAssertEqual(c.host, "127.0.0.1")
        XCTAssertEqual(c.port, 8791)
        XCTAssertEqual(c.allowedOrigins, [])
        XCTAssertEqual(c.maxSockets, 100_000)
        XCTAssertEqual(c.signalRateLimit, 50)
        XCTAssertEqual(c.turnMode, .none)
        XCTAssertEqual(c.stunURLs, [])
        XCTAssertEqual(c.cloudflareURL, "https://rtc.live.cloudflare.com")
    }

    /// §13 (SIGNAL_TRUST_PROXY, SIGNAL_TRUSTED_HOPS, SIGNAL_TRUST_CLOUDFLARE): off, 1 and off by
    /// default, so forwarded headers are ignored; trusting the proxy with 2 hops takes the second
    /// `X-Forwarded-For` element from the right, and CF-Connecting-IP only with its own setting.
    func testClientIPTrustIsOffByDefaultWithOneHop() throws {
        let (c, _) = try SignalConfiguration.load(environment: [:], arguments: [])
        XCTAssertEqual(c.clientIP, ClientIPResolver(trustCloudflare: false, trustProxy: false, trustedHops: 1))
        XCTAssertEqual(c.clientIP.clientIP(cfConnectingIP: "198.51.100.7", forwardedFor: "203.0.113.1, 203.0.113.2", peer: "127.0.0.1"), "127.0.0.1")
        let (proxied, _) = try SignalConfiguration.load(environment: ["SIGNAL_TRUST_PROXY": "true", "SIGNAL_TRUSTED_HOPS": "2"], arguments: [])
        XCTAssertEqual(proxied.clientIP, ClientIPResolver(trustCloudflare: false, trustProxy: true, trustedHops: 2))
        XCTAssertEqual(proxied.clientIP.clientIP(cfConnectingIP: "198.51.100.7", forwardedFor: "203.0.113.1, 203.0.113.2, 203.0.113.3",
                                                 peer: "127.0.0.1"), "203.0.113.2")
        let (cloudflare, _) = try SignalConfiguration.load(environment: ["SIGNAL_TRUST_CLOUDFLARE": "true"], arguments: [])
        XCTAssertEqual(cloudflare.clientIP, ClientIPResolver(trustCloudflare: true, trustProxy: false, trustedHops: 1))
        XCTAssertEqual(cloudflare.clientIP.clientIP(cfConnectingIP: "198.51.100.7", forwardedFor: "203.0.113.1", peer: "127.0.0.1"), "198.51.100.7")
    }

    func testListsAreTrimmedAndEmptyElementsIgnored() throws {
        let (c, _) = try SignalConfiguration.load(environment: ["SIGNAL_ALLOWED_ORIGINS": " https://a.example , ,https://b.example,",
                                                                "STUN_URLS": "stun:s.example:3478, stun:t.example"], arguments: [])
        XCTAssertEqual(c.allowedOrigins, ["https://a.example", "https://b.example"])
        XCTAssertEqual(c.stunURLs, ["stun:s.example:3478", "stun:t.example"])
    }

    func testAModeWithoutItsSettingsRefusesToStartNamingTheSetting() {
        XCTAssertEqual(refusal(["TURN_MODE": "twilio"]), "TURN_MODE")
        XCTAssertEqual(refusal(["TURN_MODE": "coturn", "TURN_URLS": "turn:t.example"]), "TURN_SECRET")
        XCTAssertEqual(refusal(["TURN_MODE": "coturn", "TURN_SECRET": "s"]), "TURN_URLS")
        XCTAssertEqual(refusal(["TURN_MODE": "coturn", "TURN_SECRET": "s", "TURN_URLS": "stun:t.example"]), "TURN_URLS")
        XCTAssertEqual(refusal(["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_API_TOKEN": "t"]), "CLOUDFLARE_TURN_KEY_ID")
        XCTAssertEqual(refusal(["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_KEY_ID": "k"]), "CLOUDFLARE_TURN_API_TOKEN")
        XCTAssertEqual(refusal(["CLOUDFLARE_TURN_API_URL": "http://rtc.example.com"]), "CLOUDFLARE_TURN_API_URL")
        XCTAssertNil(refusal(["CLOUDFLARE_TURN_API_URL": "http://127.0.0.1:9000"]))
        XCTAssertEqual(refusal(["SIGNAL_TRUST_PROXY": "TRUE"]), "SIGNAL_TRUST_PROXY")
        XCTAssertEqual(refusal(["SIGNAL_TRUSTED_HOPS": "0"]), "SIGNAL_TRUSTED_HOPS")
        XCTAssertEqual(refusal(["SIGNAL_TLS_CERT": #filePath]), "SIGNAL_TLS_KEY")
    }

    func testASecretNeverAppearsInARefusal() {
        do {
            _ = try SignalConfiguration.load(environment: ["TURN_MODE": "cloudflare", "CLOUDFLARE_TURN_API_TOKEN": "very-secret-token",
                                                           "CLOUDFLARE_TURN_KEY_ID": "k", "CLOUDFLARE_CA_FILE": "/nonexistent.pem"], arguments: [])
            XCTFail("a missing CA file is refused")
        } catch {
            XCTAssertEqual(error.variable, "CLOUDFLARE_CA_FILE")
            XCTAssertFalse("\(error)".contains("very-secret-token"))
        }
    }

    /// §6.4's 50 signals per 10 s unless an operator (a load test) says otherwise; 0 is unlimited.
    func testTheSignalRateLimitIsFiftyUnlessSetAndZeroLiftsIt() throws {
        XCTAssertEqual(try SignalConfiguration.load(environment: ["SIGNAL_SIGNAL_RATE_LIMIT": "0"], arguments: []).0.signalRateLimit, 0)
        XCTAssertEqual(try SignalConfiguration.load(environment: [:], arguments: ["--signal-signal-rate-limit", "500"]).0.signalRateLimit, 500)
        XCTAssertEqual(refusal(["SIGNAL_SIGNAL_RATE_LIMIT": "-1"]), "SIGNAL_SIGNAL_RATE_LIMIT")
        XCTAssertEqual(refusal(["SIGNAL_SIGNAL_RATE_LIMIT": "fifty"]), "SIGNAL_SIGNAL_RATE_LIMIT")
        var unlimited = FixedWindow(limit: 0, window: .seconds(10))
        XCTAssertTrue((0..<10_000).allSatisfy { _ in unlimited.hit(now: .milliseconds(1)) }, "a limit of 0 never refuses")
    }

    func testLocalModeIsLoopbackWithoutTURN() throws {
        let (c, _) = try SignalConfiguration.load(environment: ["TURN_MODE": "coturn", "SIGNAL_HOST": "0.0.0.0"], arguments: ["--local"])
        XCTAssertEqual(c.host, "127.0.0.1")
        XCTAssertEqual(c.turnMode, .none)
    }

    func testTheReadmeReferenceIsTheOneTheSettingsTableGenerates() throws {
        let page = try String(contentsOf: Vectors.packageRoot().appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let start = try XCTUnwrap(page.range(of: Self.begin), "docs/configuration.md lacks the signal configuration reference")
        let stop = try XCTUnwrap(page.range(of: "<!-- END generated -->", range: start.upperBound..<page.endIndex))
        XCTAssertEqual(String(page[start.upperBound..<stop.lowerBound]), SignalConfiguration.markdownReference,
                       "docs/configuration.md is stale: run scripts/update-readme-reference")
        for setting in SignalSetting.all { XCTAssertTrue(SignalConfiguration.markdownReference.contains("`\(setting.name)`"), setting.name) }
    }
}
