/// A config file in systemd `EnvironmentFile` syntax — `NAME=value` lines, `#` comments,
/// optionally quoted values — so the reference relay's `/etc/iterm2-companion-relay.env` is a
/// Tether config file as it stands, under the same names as the environment.
public enum EnvironmentFile {
    /// The file's variables. Lines without `=` are skipped; a later line wins over an earlier one.
    public static func parse(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingWhitespace()
            guard !line.isEmpty, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingWhitespace()
            var value = line[line.index(after: equals)...].trimmingWhitespace()
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = value.dropFirst().dropLast()
            }
            values[String(name)] = String(value)
        }
        return values
    }
}
