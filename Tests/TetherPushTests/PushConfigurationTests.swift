import Foundation
import TetherCrypto
import TetherPush
import TetherService
import TetherTestSupport
import XCTest

final class PushConfigurationTests: XCTestCase {
    static let begin = "<!-- BEGIN generated: tether push --help-markdown (PushConfigurationTests fails when stale) -->\n"

    private var environment: [String: String] {
        ["APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID": "FGHIJ67890", "APNS_PRIVATE_KEY": P256.PrivateKey().pemRepresentation]
    }

    func testACMEReadsUnderThePushPrefixAndIsRefusedBesideCertificateFiles() throws {
        let (configuration, _) = try PushConfiguration.load(environment: environment.merging(["PUSH_ACME_DOMAIN": "Push.Example.com"]) { $1 },
                                                            arguments: ["--acme-email", "ops@example.com", "--push-acme-http-port", "0"])
        XCTAssertEqual(configuration.acme?.domains, ["push.example.com"])
        XCTAssertEqual(configuration.acme?.email, "ops@example.com")
        XCTAssertNil(configuration.acme?.httpPort, "0: TLS-ALPN-01 only")
        XCTAssertThrowsError(try PushConfiguration.load(environment: environment, arguments: ["--acme-domain", "push.example.com", "--tls-cert", #filePath, "--tls-key", #filePath])) {
            XCTAssertEqual(($0 as? SettingError)?.variable, "PUSH_ACME_DOMAIN")
        }
    }

    func testTheDefaultsAreTheSettledOnes() throws {
        let (configuration, _) = try PushConfiguration.load(environment: environment, arguments: [])
        XCTAssertEqual(configuration.host, "127.0.0.1")
        XCTAssertEqual(configuration.port, 8788)
        XCTAssertEqual(configuration.databasePath, "push.db")
        XCTAssertEqual(configuration.profiles, [.mytty])
        XCTAssertEqual(configuration.topic, "com.m-tkg.mytty.remote")
        XCTAssertEqual(configuration.topicITerm2, "com.googlecode.iterm2.companion")
        XCTAssertEqual(configuration.endpoints, .init(production: "https://api.push.apple.com", sandbox: "https://api.sandbox.push.apple.com"))
        XCTAssertNil(configuration.caFile)
        XCTAssertEqual(configuration.registerLimit, 10)
    }

    func testFlagsWinAndTheITermNamesOfTheKeyAreAccepted() throws {
        var environment = self.environment
        environment["APNS_P8"] = environment.removeValue(forKey: "APNS_PRIVATE_KEY")
        environment["PUSH_PROFILES"] = "iterm2"
        let (configuration, _) = try PushConfiguration.load(environment: environment, arguments: ["--push-profiles", "mytty,iterm2", "--push-port", "9000"])
        XCTAssertEqual(configuration.profiles, [.mytty, .iterm2])
        XCTAssertEqual(configuration.port, 9000)
        XCTAssertNotNil(configuration.key)
        // `APNS_P8_FILE` stands for `APNS_PRIVATE_KEY_FILE` (push.md §1.1).
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tether-p8-\(UUID().uuidString).p8")
        defer { try? FileManager.default.removeItem(at: file) }
        let key = P256.PrivateKey()
        try Data(key.pemRepresentation.utf8).write(to: file)
        environment["APNS_P8"] = nil
        environment["APNS_P8_FILE"] = file.path
        let (fromFile, _) = try PushConfiguration.load(environment: environment, arguments: [])
        XCTAssertEqual(fromFile.key?.publicKey.x963Representation, key.publicKey.x963Representation)
    }

    /// push.md §5: `APNS_TOPIC` and `APNS_TOPIC_ITERM2` set the two topics (the requests'
    /// `apns-topic`: `PushServerTests.testTheConfiguredTopicsAreSentToAPNs`).
    func testTheTopicsCanBeSet() throws {
        let (configuration, _) = try PushConfiguration.load(environment: environment.merging(["APNS_TOPIC": "com.example.app", "APNS_TOPIC_ITERM2": "com.example.iterm"]) { $1 },
                                                            arguments: [])
        XCTAssertEqual(configuration.topic, "com.example.app")
        XCTAssertEqual(configuration.topicITerm2, "com.example.iterm")
    }

    func testEachBadSettingIsRefusedByName() {
        func refusal(_ change: [String: String?]) -> String? {
            var environment = self.environment
            for (name, value) in change { environment[name] = value }
            do {
                _ = try PushConfiguration.load(environment: environment, arguments: [])
                return nil
            } catch {
                return error.variable
            }
        }
        XCTAssertEqual(refusal(["APNS_TEAM_ID": nil]), "APNS_TEAM_ID")
        XCTAssertEqual(refusal(["APNS_TEAM_ID": "abcde12345"]), "APNS_TEAM_ID")
        XCTAssertEqual(refusal(["APNS_KEY_ID": "FGHIJ6789"]), "APNS_KEY_ID")
        XCTAssertEqual(refusal(["APNS_PRIVATE_KEY": nil]), "APNS_PRIVATE_KEY")
        XCTAssertEqual(refusal(["APNS_PRIVATE_KEY": nil, "APNS_PRIVATE_KEY_FILE": "/nonexistent.p8"]), "APNS_PRIVATE_KEY_FILE")
        XCTAssertEqual(refusal(["PUSH_PROFILES": "mytty,apple"]), "PUSH_PROFILES")
        XCTAssertEqual(refusal(["APNS_PRODUCTION_URL": "http://api.push.apple.com"]), "APNS_PRODUCTION_URL")
        XCTAssertEqual(refusal(["APNS_CA_FILE": "/nonexistent.pem"]), "APNS_CA_FILE")
        XCTAssertEqual(refusal(["PUSH_TLS_CERT": #filePath]), "PUSH_TLS_KEY")
    }

    func testTheReadmeReferenceIsTheOneTheSettingsTableGenerates() throws {
        let page = try String(contentsOf: Vectors.packageRoot().appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let start = try XCTUnwrap(page.range(of: Self.begin), "docs/configuration.md lacks the push configuration reference")
        let stop = try XCTUnwrap(page.range(of: "<!-- END generated -->", range: start.upperBound..<page.endIndex))
        XCTAssertEqual(String(page[start.upperBound..<stop.lowerBound]), PushConfiguration.markdownReference,
                       "docs/configuration.md is stale: run scripts/update-readme-reference")
        for setting in PushSetting.all { XCTAssertTrue(PushConfiguration.markdownReference.contains("`\(setting.name)`"), setting.name) }
    }
}
