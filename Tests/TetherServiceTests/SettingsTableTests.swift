@testable import TetherService
import XCTest

/// A small service's table, standing in for any server built on the chassis.
private enum Sample {
    static let host = Setting<String>("PUSH_HOST", default: "127.0.0.1", parser: .text, help: "bind address")
    static let port = Setting<UInt16>("PUSH_PORT", default: 8790, fallbacks: ["PORT"], parser: .port, help: "port")
    static let maxDevices = Setting<Int64>("PUSH_MAX_DEVICES", default: 1000, parser: .countOrDefault(1000), help: "devices (0 = default)")
    static let rate = Setting<Int64>("PUSH_RATE_LIMIT", default: 60, parser: .zeroOrPositive, help: "pushes per minute (0 = off)")
    static let ttl = Setting<Int64>("PUSH_TTL_MS", default: 30_000, parser: .positiveInteger, help: "how long | a push waits")
    static let verbose = Setting<Bool>("PUSH_LOG", default: false, parser: .trueOrFalse, help: "verbose diagnostics iff true")
    static let mode = Setting<Bool>("PUSH_APNS_ENV", default: false, defaultText: "production",
                                    parser: .oneOf([("production", false), ("development", true)]), help: "APNs environment")
    static let key = Setting<String?>("PUSH_KEY_FILE", extraFlags: [.init("--key", needs: "a file path")], help: "APNs key")
    static let local = SettingSwitch("--local", help: "loopback only")

    static let table = SettingsTable(command: "tether push", synopsis: "[--local]", switches: [local],
                                     rows: [host, port, maxDevices, rate, ttl, verbose, mode, key])
}

final class SettingsTableTests: XCTestCase {
    private func values(_ environment: [String: String] = [:], _ arguments: [String] = []) throws -> SettingValues {
        try Sample.table.values(environment: environment, arguments: arguments)
    }

    private func assertError<V>(_ setting: Setting<V>, _ environment: [String: String], _ expected: String,
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try values(environment).value(of: setting), file: file, line: line) {
            XCTAssertEqual("\($0)", expected, file: file, line: line)
        }
    }

    func testTheFlagIsDerivedFromTheEnvironmentNameAndTheConfigKeyIsTheNameItself() {
        XCTAssertEqual(Sample.maxDevices.entry.flag, "--push-max-devices")
        XCTAssertEqual(Sample.maxDevices.entry.configKey, "PUSH_MAX_DEVICES")
        XCTAssertEqual(Sample.key.entry.flags, ["--push-key-file", "--key"])
    }

    func testUnsetSettingsTakeTheirDefaults() throws {
        let v = try values()
        XCTAssertEqual(try v.value(of: Sample.host), "127.0.0.1")
        XCTAssertEqual(try v.value(of: Sample.port), 8790)
        XCTAssertEqual(try v.value(of: Sample.key), nil)
        XCTAssertFalse(v.isOn(Sample.local))
    }

    func testAConfigFileIsBeneathTheEnvironmentWhichIsBeneathFlags() throws {
        let file = """
        # push.env
        PUSH_HOST=10.0.0.1
        PUSH_PORT="9000"
        PUSH_MAX_DEVICES='5'
        PUSH_RATE_LIMIT=7
        """
        let v = try Sample.table.load(arguments: ["--config", "/etc/push.env", "--push-port=9200", "--local"],
                                      environment: ["PUSH_PORT": "9100", "PUSH_MAX_DEVICES": "6"]) { path in
            path == "/etc/push.env" ? file : nil
        }
        XCTAssertEqual(try v.value(of: Sample.host), "10.0.0.1", "the file alone")
        XCTAssertEqual(try v.value(of: Sample.maxDevices), 6, "the environment over the file")
        XCTAssertEqual(try v.value(of: Sample.port), 9200, "the flag over both")
        XCTAssertEqual(try v.value(of: Sample.rate), 7)
        XCTAssertTrue(v.isOn(Sample.local))
    }

    func testAnUnreadableConfigFileStopsStartUpNamingTheFlag() {
        XCTAssertThrowsError(try Sample.table.load(arguments: ["--config=/nope"], environment: [:]) { _ in nil }) {
            XCTAssertEqual("\($0)", "--config: cannot read the env-file /nope")
        }
        XCTAssertThrowsError(try Sample.table.load(arguments: ["--config"], environment: [:]) { _ in "" }) {
            XCTAssertEqual("\($0)", "--config: needs an env-file path")
        }
    }

    func testAFallbackIsReadOnlyWhenTheNameIsUnsetAndItsErrorsNameTheFallback() throws {
        XCTAssertEqual(try values(["PORT": "9300"]).value(of: Sample.port), 9300)
        XCTAssertEqual(try values(["PORT": "9300", "PUSH_PORT": "9400"]).value(of: Sample.port), 9400)
        XCTAssertEqual(try values(["PORT": "x"], ["--push-port", "9500"]).value(of: Sample.port), 9500, "a flag sets the name itself")
        assertError(Sample.port, ["PORT": "x"], "PORT: not a port number: x")
        assertError(Sample.port, ["PUSH_PORT": "70000"], "PUSH_PORT: not a port number: 70000")
    }

    func testAnEmptyVariableIsUnset() throws {
        XCTAssertEqual(try values(["PUSH_HOST": ""]).value(of: Sample.host), "127.0.0.1")
        XCTAssertFalse(try values(["PUSH_KEY_FILE": ""]).isSet(Sample.key))
    }

    func testFlagsTakeTheirValueAfterEqualsOrAsTheNextArgument() throws {
        let v = try values([:], ["--push-host", "0.0.0.0", "--key=/k.pem", "--push-log=true"])
        XCTAssertEqual(try v.value(of: Sample.host), "0.0.0.0")
        XCTAssertEqual(try v.value(of: Sample.key), "/k.pem")
        XCTAssertTrue(try v.value(of: Sample.verbose))
    }

    func testFlagErrorsNameWhatTheOperatorTyped() {
        XCTAssertThrowsError(try values([:], ["--push-nope", "1"])) { XCTAssertEqual("\($0)", "--push-nope: unknown option (see --help)") }
        XCTAssertThrowsError(try values([:], ["--push-nope=1"])) { XCTAssertEqual("\($0)", "--push-nope=1: unknown option (see --help)") }
        XCTAssertThrowsError(try values([:], ["--push-port"])) { XCTAssertEqual("\($0)", "PUSH_PORT: --push-port needs a value") }
        XCTAssertThrowsError(try values([:], ["--key"])) { XCTAssertEqual("\($0)", "--key: needs a file path") }
        XCTAssertThrowsError(try values([:], ["--config", "x"]), "--config is load's, not a setting") {
            XCTAssertEqual(($0 as? SettingError)?.variable, "--config")
        }
    }

    func testIntegerParsersRefuseWhatTheOperatorCannotHaveMeant() {
        for text in ["8GiB", "1.5", "1e3", "+5", " 5", "٣"] {
            assertError(Sample.ttl, ["PUSH_TTL_MS": text], "PUSH_TTL_MS: not an integer: \(text)")
        }
        assertError(Sample.ttl, ["PUSH_TTL_MS": "0"], "PUSH_TTL_MS: must be a positive integer, not 0")
        assertError(Sample.maxDevices, ["PUSH_MAX_DEVICES": "-1"], "PUSH_MAX_DEVICES: must not be negative: -1")
        assertError(Sample.rate, ["PUSH_RATE_LIMIT": "-1"], "PUSH_RATE_LIMIT: must be 0 (off) or a positive integer, not -1")
    }

    func testZeroMeansTheDefaultForACountAndOffForALimit() throws {
        let v = try values(["PUSH_MAX_DEVICES": "0", "PUSH_RATE_LIMIT": "0"])
        XCTAssertEqual(try v.value(of: Sample.maxDevices), 1000)
        XCTAssertEqual(try v.value(of: Sample.rate), 0)
    }

    func testSwitchesAreExactlyTrueOrFalseAndOtherSpellingsAreRefusedByName() throws {
        for text in ["TRUE", "1", "yes", "on"] {
            XCTAssertThrowsError(try values(["PUSH_LOG": text]).value(of: Sample.verbose), text) { XCTAssertEqual(($0 as? SettingError)?.variable, "PUSH_LOG") }
        }
        XCTAssertTrue(try values(["PUSH_LOG": "true"]).value(of: Sample.verbose))
        XCTAssertFalse(try values(["PUSH_LOG": "false"]).value(of: Sample.verbose))
    }

    func testAChoiceNamesEveryAllowedWord() throws {
        XCTAssertTrue(try values(["PUSH_APNS_ENV": "development"]).value(of: Sample.mode))
        assertError(Sample.mode, ["PUSH_APNS_ENV": "staging"], "PUSH_APNS_ENV: must be production or development, not staging")
        let three = SettingParser<Int>.oneOf([("a", 1), ("b", 2), ("c", 3)])
        XCTAssertThrowsError(try three.parse("d")) { XCTAssertEqual(($0 as? InvalidSettingValue)?.message, "must be a, b or c, not d") }
    }

    func testProblemsListsEveryInvalidSettingInTableOrder() throws {
        let v = try values(["PUSH_TTL_MS": "0", "PORT": "x", "PUSH_APNS_ENV": "beta"])
        XCTAssertEqual(Sample.table.problems(in: v).map(\.variable), ["PORT", "PUSH_TTL_MS", "PUSH_APNS_ENV"])
        XCTAssertEqual(Sample.table.problems(in: try values()), [])
    }

    func testHelpDocumentsEveryFlagNameDefaultAndMeaning() {
        let help = Sample.table.helpText
        XCTAssertTrue(help.hasPrefix("usage: tether push [--config ENV-FILE] [--local] [--<setting> VALUE ...]\n"), help)
        XCTAssertTrue(help.contains("  --push-port  (PUSH_PORT or PORT, default 8790)\n      port\n"), help)
        XCTAssertTrue(help.contains("  --push-key-file, --key  (PUSH_KEY_FILE, default unset)\n      APNs key\n"), help)
        XCTAssertTrue(help.contains("  --push-apns-env  (PUSH_APNS_ENV, default production)\n"), help)
        XCTAssertTrue(help.contains("  --push-log  (PUSH_LOG, default off)\n"), help)
        XCTAssertTrue(help.contains("  --local                 loopback only\n"), help)
        XCTAssertTrue(help.contains("  --config ENV-FILE       read settings from this env-file"), help)
    }

    func testTheMarkdownReferenceHasOneRowPerSettingWithPipesEscaped() {
        let lines = Sample.table.markdownReference.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2 + 8 + 3, "header, rows, --config, --check and the switch")
        XCTAssertTrue(lines.contains("| `PUSH_PORT` or `PORT` | `--push-port` | 8790 | port |"))
        XCTAssertTrue(lines.contains("| `PUSH_TTL_MS` | `--push-ttl-ms` | 30000 | how long \\| a push waits |"))
        XCTAssertTrue(lines.contains("| `PUSH_KEY_FILE` | `--push-key-file`, `--key` | unset | APNs key |"))
        XCTAssertTrue(lines.contains("| | `--local` | off | loopback only |"))
    }

    func testMarkdownCellsEscapeWhatWouldBreakTheTableOrReadAsMarkup() {
        XCTAssertEqual(SettingsTable.cell("origin http://127.0.0.1:<port>"), "origin http://127.0.0.1:\\<port\\>")
        XCTAssertEqual(SettingsTable.cell("/attest* paths"), "/attest\\* paths")
        XCTAssertEqual(SettingsTable.cell("see `a|b <c>*`"), "see `a\\|b <c>*`")
    }

    func testAnEnvironmentFileReadsSystemdSyntax() {
        let parsed = EnvironmentFile.parse("""
        # comment
          A = 1
        B="two words"
        C='3'
        not a setting
        D=
        A=4
        """)
        XCTAssertEqual(parsed, ["A": "4", "B": "two words", "C": "3", "D": ""])
    }
}
