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

extension SettingsTable {
    /// The settings as a section of a man page (roff), for the package's `tether(1)`: the same
    /// rows `--help` prints, so the page cannot drift from the binary it documents.
    public var manSection: String {
        var text = ".TP\n.B \(Self.configFlag) \\fIENV-FILE\\fR\nread settings from this env-file (systemd EnvironmentFile syntax)\n"
        text += ".TP\n.B \(Self.checkFlag)\n\(Self.roff(Self.checkHelp))\n"
        for toggle in switches { text += ".TP\n.B \(Self.roff(toggle.flag))\n\(Self.roff(toggle.help))\n" }
        for entry in entries {
            let names = ([entry.name] + entry.fallbacks).joined(separator: " or ")
            text += ".TP\n\\fB\(Self.roff(entry.flags.joined(separator: ", ")))\\fR \\fIVALUE\\fR (\(Self.roff(names)); default \(Self.roff(entry.defaultText)))\n"
            text += Self.roff(entry.help) + "\n"
        }
        return text
    }

    /// Text safe in a roff line: backslashes doubled, hyphens made literal, and a leading dot or
    /// quote escaped so no line reads as a request.
    public static func roff(_ text: String) -> String {
        var out = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }
}
