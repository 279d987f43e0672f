/// The Prometheus text exposition format 0.0.4: escaping, number formatting, names.
public enum Prometheus {
    /// The `Content-Type` of a scrape.
    public static let contentType = "text/plain; version=0.0.4"

    /// A label value: backslash, double quote and newline escaped.
    public static func escapeLabelValue(_ value: String) -> String {
        escape(value, quotes: true)
    }

    /// `# HELP` text: backslash and newline escaped (a quote is literal there).
    public static func escapeHelp(_ help: String) -> String {
        escape(help, quotes: false)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        guard text.contains(where: { $0 == "\\" || $0 == "\n" || (quotes && $0 == "\"") }) else { return text }
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\"" where quotes: out += "\\\""
            default: out.append(character)
            }
        }
        return out
    }

    /// A sample value: Swift's shortest round-trip spelling (`0.0`, `3605.5`, `1e-05`, which Go's
    /// ParseFloat reads exactly), with the format's own words for the infinities and NaN.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Inf" : "+Inf" }
        return "\(value)"
    }

    /// A histogram bound as the official clients write it: `1` rather than `1.0`, `0.005`, `+Inf`.
    public static func formatBound(_ bound: Double) -> String {
        if bound.isFinite, bound == bound.rounded(), abs(bound) < 1e15 { return String(Int64(bound)) }
        return format(bound)
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    public static func isValidMetricName(_ name: String) -> Bool {
        isValid(name, allowColon: true)
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, and not starting `__` (reserved).
    public static func isValidLabelName(_ name: String) -> Bool {
        isValid(name, allowColon: false) && !name.hasPrefix("__")
    }

    private static func isValid(_ name: String, allowColon: Bool) -> Bool {
        guard let first = name.utf8.first else { return false }
        func letter(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || (allowColon && c == 0x3A) }
        return letter(first) && name.utf8.allSatisfy { letter($0) || ($0 >= 0x30 && $0 <= 0x39) }
    }
}
