extension SettingsTable {
    /// The configuration reference as a Markdown table (`tether <service> --help-markdown`), for
    /// a README or an operator's guide; a test compares it with the README so neither drifts.
    public var markdownReference: String {
        var text = "| Environment / config-file name | Flag | Default | Meaning |\n|---|---|---|---|\n"
        for entry in entries {
            let names = ([entry.name] + entry.fallbacks).map { "`\($0)`" }.joined(separator: " or ")
            let flags = entry.flags.map { "`\($0)`" }.joined(separator: ", ")
            text += "| \(names) | \(flags) | \(Self.cell(entry.defaultText)) | \(Self.cell(entry.help)) |\n"
        }
        text += "| | `\(Self.configFlag) ENV-FILE` | | read settings from this env-file (systemd EnvironmentFile syntax, the names above) |\n"
        for toggle in switches {
            text += "| | `\(toggle.flag)` | off | \(Self.cell(toggle.help)) |\n"
        }
        return text
    }

    /// A table cell: a `|` would end the cell early.
    private static func cell(_ text: String) -> String { text.replacingPipes() }
}

private extension String {
    func replacingPipes() -> String {
        var out = ""
        for character in self { out += character == "|" ? "\\|" : String(character) }
        return out
    }
}
