extension SettingsTable {
    /// `tether <service> --check`: one line per setting, the value in effect (a secret only as
    /// `(set)`, a password in a URL as `***`) and where it came from, then every problem start-up
    /// would stop at or warn about. The service's cross-setting checks come in as `build`, which
    /// throws what start-up would and returns its notes.
    public func checkReport(_ values: SettingValues,
                            build: (SettingValues) throws(SettingError) -> [String]) -> (lines: [String], problems: [String], advice: [String]) {
        let width = entries.map(\.name.count).max() ?? 0
        var lines: [String] = []
        for entry in entries {
            let origin = values.origin(of: entry)
            let shown: String
            if let (_, text) = values.source(of: entry) {
                shown = entry.isSecret ? "(set)" : Self.redactingPasswords(text)
            } else {
                shown = entry.defaultText
            }
            let padding = String(repeating: " ", count: width - entry.name.count)
            lines.append("\(entry.name)\(padding)  \(shown)  [\(origin)]")
        }
        // A look-alike variable is a typo (a problem); the service's own start-up warnings are
        // advice about a valid deployment (loopback without a trusted proxy), so the check says
        // them and still passes: the packaged settings files must pass it.
        var problems = values.warnings
        problems += self.problems(in: values).map(\.description)
        var advice: [String] = []
        if problems.isEmpty {
            do throws(SettingError) {
                advice = try build(values).filter { $0.hasPrefix("warning") }
            } catch {
                problems.append(error.description)
            }
        }
        return (lines, problems, advice)
    }

    /// `postgres://user:secret@host/db` → `postgres://user:***@host/db`; anything else as it is.
    static func redactingPasswords(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].firstIndex(of: "@") else { return text }
        let userinfo = text[scheme.upperBound..<at]
        guard let colon = userinfo.firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }
}

extension SettingEntry {
    /// A value never printed: a secret, a token or a private key itself (a path to one is not).
    public var isSecret: Bool {
        ["_SECRET", "_TOKEN", "_PRIVATE_KEY", "_PASSWORD"].contains { name.hasSuffix($0) }
    }
}
