public import Foundation

/// A section of a document in the repository that a generator owns (the metrics reference in
/// `docs/metrics.md`), between `<!-- begin NAME -->` and `<!-- end NAME -->`. A test compares it
/// with what the code generates, so the document cannot drift; `TETHER_UPDATE_DOCS=1` rewrites
/// the section instead (then review the diff and commit it).
public enum GeneratedDocument {
    /// Nil when the section matches (or was rewritten); otherwise the difference to report.
    public static func check(_ path: String, section name: String, generated: String) throws -> String? {
        let url = Vectors.packageRoot().appendingPathComponent(path)
        let text = try String(contentsOf: url, encoding: .utf8)
        let begin = "<!-- begin \(name) -->\n", end = "<!-- end \(name) -->"
        guard let start = text.range(of: begin), let stop = text.range(of: end, range: start.upperBound..<text.endIndex) else {
            return "\(path) has no section \(name)"
        }
        let current = String(text[start.upperBound..<stop.lowerBound])
        if current == generated { return nil }
        if ProcessInfo.processInfo.environment["TETHER_UPDATE_DOCS"] == "1" {
            try (text[..<start.upperBound] + generated + text[stop.lowerBound...]).write(to: url, atomically: true, encoding: .utf8)
            return nil
        }
        return "\(path) section \(name) differs from the generated one (TETHER_UPDATE_DOCS=1 rewrites it):\n\(generated)"
    }
}
