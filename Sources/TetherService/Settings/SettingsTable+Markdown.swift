extension SettingsTable {
    /// The configuration reference as a Markdown table (`tether <service> --help-markdown`), for
    /// docs/configuration.md; a test per service compares it with that page so neither drifts.
    public var markdownReference: String {
        var text = "| Environment / config-file name | Flag | Default | Meaning |\n|---|---|---|---|\n"
        for entry in entries {
            let names = ([entry.name] + entry.fallbacks).map { "`\($0)`" }.joined(separator: " or ")
            let flags = entry.flags.map { "`\($0)`" }.joined(separator: ", ")
            text += "| \(names) | \(flags) | \(Self.cell(entry.defaultText)) | \(Self.cell(entry.help)) |\n"
        }
        text += "| | `\(Self.configFlag) ENV-FILE` | | read settings from this env-file (systemd EnvironmentFile syntax, the names above) |\n"
        text += "| | `\(Self.checkFlag)` | | \(Self.cell(Self.checkHelp)) |\n"
        for toggle in switches {
            text += "| | `\(toggle.flag)` | off | \(Self.cell(toggle.help)) |\n"
        }
        return text
    }

    /// A table cell: `|` ends a cell even inside a code span (GFM), so it is always escaped;
    /// outside code spans `<port>` would read as an HTML tag and `*` as emphasis.
    static func cell(_ text: String) -> String {
        var out = ""
        var inCode = false
        for character in text {
            if character == "`" { inCode.toggle() }
            if character == "|" || (!inCode && "<>*".contains(character)) { out.append("\\") }
            out.append(character)
        }
        return out
    }
}
