/// A service's settings, declared once: every row's environment name, flag, config-file key,
/// default, parser and one line of documentation. `--help`, the Markdown configuration reference
/// and start-up errors are all generated from it, so none of them can go stale.
///
/// Precedence, lowest first: the config file (`--config ENV-FILE`), the environment, flags.
public struct SettingsTable: Sendable {
    /// How the service is invoked, for the usage line (`tether relay`).
    public let command: String
    /// Usage-line fragments for the service's own flags, between `--config` and the settings
    /// (`[--local] [--tls-cert FILE --tls-key FILE]`).
    public let synopsis: String
    /// Flag-only switches (`--local`), listed first in `--help`.
    public let switches: [SettingSwitch]
    /// The settings, in the order `--help` and the reference list them.
    public let rows: [any SettingRow]

    /// The flag that names a config file; handled by `load`, before the other flags.
    public static let configFlag = "--config"
    /// The flag that checks the settings instead of starting (the command answers it).
    public static let checkFlag = "--check"
    static let checkHelp = "print every setting in effect and where it came from (default, file, env, flag), secrets hidden, then exit: 0 if nothing is wrong (advice such as a loopback bind without a trusted proxy is printed as a warning), 2 on a typo or a bad value"

    /// Names and flags must be unique across the table (checked: a duplicate is a programming
    /// error, caught at the first start-up).
    public init(command: String, synopsis: String = "", switches: [SettingSwitch] = [], rows: [any SettingRow]) {
        self.command = command
        self.synopsis = synopsis
        self.switches = switches
        self.rows = rows
        // Two rows answering to one name or flag would make one of them unreachable.
        let names = rows.flatMap { [$0.entry.name] + $0.entry.fallbacks }
        precondition(Set(names).count == names.count, "\(command): a setting name appears twice")
        let flags = rows.flatMap(\.entry.flags) + switches.map(\.flag) + [Self.configFlag, Self.checkFlag]
        precondition(Set(flags).count == flags.count, "\(command): a flag appears twice")
    }

    /// Every row's documented half.
    public var entries: [SettingEntry] { rows.map(\.entry) }

    /// Every row's value parsed, in table order: the errors start-up would give, all at once
    /// (a service that reports one at a time reads `value(of:)` in its own order instead).
    public func problems(in values: SettingValues) -> [SettingError] {
        rows.compactMap { row in
            do throws(SettingError) {
                try row.check(values)
                return nil
            } catch {
                return error
            }
        }
    }
}
