extension SettingsTable {
    /// The column the switches' help starts in, so short flags line up.
    static let switchColumn = 24

    /// `tether <service> --help`: usage, precedence, then every switch and setting with its
    /// flags, environment name, default and meaning.
    public var helpText: String {
        var text = "usage: \(command) [\(Self.configFlag) ENV-FILE]\(synopsis.isEmpty ? "" : " " + synopsis) [--<setting> VALUE ...]\n\n"
        text += "Every setting is read from an env-file (\(Self.configFlag): NAME=value lines), the environment under\n"
        text += "its name, or the flag beside it (flags win, then the environment). Invalid values stop start-up.\n\n"
        text += Self.switchLine("\(Self.configFlag) ENV-FILE", "read settings from this env-file (systemd EnvironmentFile syntax)")
        text += Self.switchLine(Self.checkFlag, Self.checkHelp)
        for toggle in switches { text += Self.switchLine(toggle.flag, toggle.help) }
        for entry in entries {
            text += "  \(entry.flags.joined(separator: ", "))  (\(Self.names(entry)), default \(entry.defaultText))\n"
            text += "      \(entry.help)\n"
        }
        return text
    }

    private static func switchLine(_ flag: String, _ help: String) -> String {
        let left = "  " + flag
        return left + String(repeating: " ", count: max(2, switchColumn + 2 - left.count)) + help + "\n"
    }

    /// `RELAY_PORT` or, with fallbacks, `RELAY_PORT or PORT`.
    private static func names(_ entry: SettingEntry) -> String {
        ([entry.name] + entry.fallbacks).joined(separator: " or ")
    }
}
