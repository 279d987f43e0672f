@testable import TetherService
import XCTest

/// An operator's typos: in a config file they stop start-up, in the environment they are
/// warned about, and both name the setting that was probably meant.
final class SettingsTypoTests: XCTestCase {
    private static let table = SettingsTable(command: "tether relay", switches: [SettingSwitch("--local", help: "loopback only")], rows: [
        Setting<String?>("RELAY_TLS_CERT", help: "certificate"),
        Setting<String?>("RELAY_TLS_KEY", help: "key"),
        Setting<Bool>("RELAY_TRUST_PROXY", default: false, parser: .trueOrFalse, help: "trust the proxy"),
        Setting<UInt16>("RELAY_PORT", default: 8787, fallbacks: ["PORT"], parser: .port, help: "port"),
        Setting<String?>("RELAY_METRICS_PUSH_TOKEN", help: "token"),
        Setting<String?>("RELAY_DB", help: "database"),
        Setting<String?>("APPATTEST_ENV", help: "environment"),
        Setting<String?>("APPATTEST_ROOT_PEM", help: "root"),
        Setting<String?>("APP_ID", help: "app"),
    ])

    private func load(file: String, environment: [String: String] = [:], _ arguments: [String] = []) throws -> SettingValues {
        try Self.table.load(arguments: ["--config", "/etc/relay.env"] + arguments, environment: environment) { $0 == "/etc/relay.env" ? file : nil }
    }

    func testAnUnknownKeyInAConfigFileStopsStartUpNamingTheSettingMeant() {
        for (typo, meant) in [("RELAY_TLS_CRT", "RELAY_TLS_CERT"), ("RELAY_TRUST_PROXIE", "RELAY_TRUST_PROXY"), ("REALY_PORT", "RELAY_PORT")] {
            XCTAssertThrowsError(try load(file: "RELAY_PORT=9000\n\(typo)=x\n")) { error in
                XCTAssertEqual(error as? SettingError,
                               SettingError(variable: typo, message: "not a setting of tether relay (in /etc/relay.env) (did you mean \(meant)?); see --help"))
            }
        }
        XCTAssertThrowsError(try load(file: "NODE_OPTIONS=--max-old-space-size=512\n")) { error in
            XCTAssertEqual("\(error)", "NODE_OPTIONS: not a setting of tether relay (in /etc/relay.env); see --help", "nothing near it: no guess")
        }
        XCTAssertNoThrow(try load(file: "# comments and blank lines are fine\n\nPORT=9000\nRELAY_TLS_CERT=/c\n"), "a fallback name is a setting")
    }

    func testALookAlikeVariableInTheEnvironmentIsWarnedAboutAndOthersAreLeftAlone() throws {
        let values = try Self.table.load(arguments: [], environment: [
            "REALY_PORT": "1", "RELAY_TRUST_PROXIE": "true", "APPATTEST_ENVIRONMENT": "development", "RELAY_PORT": "9000",
            "HOME": "/root", "PUSH_PORT": "1", "APP_NAME": "x",
        ]) { _ in nil }
        XCTAssertEqual(values.warnings, [
            "warning: APPATTEST_ENVIRONMENT is not a setting of tether relay; ignored (did you mean APPATTEST_ENV?)",
            "warning: REALY_PORT is not a setting of tether relay; ignored (did you mean RELAY_PORT?)",
            "warning: RELAY_TRUST_PROXIE is not a setting of tether relay; ignored (did you mean RELAY_TRUST_PROXY?)",
        ], "RELAY_ and APPATTEST_ are this table's prefixes, and REALY_PORT is a typo away from a setting; PUSH_PORT and APP_NAME are neither")
        XCTAssertEqual(Self.table.prefixes, ["APPATTEST_", "RELAY_"])
        XCTAssertEqual(try values.value(of: Setting<UInt16>("RELAY_PORT", default: 8787, parser: .port, help: "")), 9000)
    }

    func testAnUnknownFlagNamesTheFlagMeant() {
        XCTAssertThrowsError(try Self.table.values(environment: [:], arguments: ["--relay-tls-crt", "/c"])) { error in
            XCTAssertEqual("\(error)", "--relay-tls-crt: unknown option (did you mean --relay-tls-cert?) (see --help)")
        }
        XCTAssertThrowsError(try Self.table.values(environment: [:], arguments: ["--frobnicate"])) { error in
            XCTAssertEqual("\(error)", "--frobnicate: unknown option (see --help)")
        }
    }

    func testEachValueKnowsWhetherItCameFromTheDefaultTheFileTheEnvironmentOrAFlag() throws {
        let values = try load(file: "RELAY_TLS_CERT=/from/file\nRELAY_TLS_KEY=/from/file\nRELAY_DB=/from/file\n",
                              environment: ["RELAY_TLS_KEY": "/from/env", "RELAY_DB": "/from/env"], ["--relay-db", "/from/flag"])
        let origin = { (name: String) in values.origin(of: Self.table.entries.first { $0.name == name }!) }
        XCTAssertEqual(origin("RELAY_TLS_CERT"), .file("/etc/relay.env"))
        XCTAssertEqual(origin("RELAY_TLS_KEY"), .environment)
        XCTAssertEqual(origin("RELAY_DB"), .flag)
        XCTAssertEqual(origin("RELAY_PORT"), .defaultValue)
    }

    func testTheCheckReportHidesSecretsAndPasswordsAndListsEveryProblem() throws {
        let values = try Self.table.load(arguments: [], environment: [
            "RELAY_METRICS_PUSH_TOKEN": "s3cret-token", "RELAY_DB": "postgres://relay:hunter2@db.internal/relay",
            "RELAY_TRUST_PROXY": "yes", "RELAY_TRUST_PROXIE": "true",
        ]) { _ in nil }
        let (lines, problems, advice) = Self.table.checkReport(values) { _ throws(SettingError) in [] }
        let text = lines.joined(separator: "\n")
        XCTAssertFalse(text.contains("s3cret-token") || text.contains("hunter2"), text)
        XCTAssertTrue(lines.contains("RELAY_METRICS_PUSH_TOKEN  (set)  [env]"), text)
        XCTAssertTrue(lines.contains("RELAY_DB                  postgres://relay:***@db.internal/relay  [env]"), text)
        XCTAssertTrue(lines.contains("RELAY_PORT                8787  [default]"), text)
        XCTAssertEqual(problems, [
            "warning: RELAY_TRUST_PROXIE is not a setting of tether relay; ignored (did you mean RELAY_TRUST_PROXY?)",
            "RELAY_TRUST_PROXY: must be true or false (other spellings are not read as on): yes",
        ])
        XCTAssertEqual(advice, [], "advice is given only for settings that hold")
    }

    func testNearMissesAreOnlySuggestedWhenTheyAreNear() {
        XCTAssertEqual(SettingSuggestion.editDistance(Array("REALY".utf8), Array("RELAY".utf8)), 1, "a transposition is one edit")
        XCTAssertNil(SettingSuggestion.nearest(to: "RELAY_ZZZZZZZZ", in: ["RELAY_PORT", "RELAY_DB"]))
        XCTAssertEqual(SettingSuggestion.nearest(to: "RELAY_DV", in: ["RELAY_PORT", "RELAY_DB"]), "RELAY_DB")
    }
}
