/// "Did you mean": the known name nearest a mistyped one, when it is near enough to be the one
/// meant (`REALY_PORT` → `RELAY_PORT`, `RELAY_TRUST_PROXIE` → `RELAY_TRUST_PROXY`,
/// `RELAY_TLS_CRT` → `RELAY_TLS_CERT`), or nil for a name like no known one.
enum SettingSuggestion {
    /// The nearest of `candidates` by edit distance (a transposition counts once), when at most
    /// a quarter of the typed name's length and at most 3 edits away; else the longest candidate
    /// the typed name starts with or is the start of (`APPATTEST_ENVIRONMENT` → `APPATTEST_ENV`),
    /// when that shared start is a name of its own, not a bare prefix.
    static func nearest(to typed: String, in candidates: some Sequence<String>) -> String? {
        let limit = min(3, max(1, typed.count / 4))
        var best: (name: String, distance: Int)?
        var extended: String?
        for candidate in candidates {
            if candidate.count >= 6, typed.hasPrefix(candidate) || candidate.hasPrefix(typed) && typed.count >= 6,
               candidate.count > extended?.count ?? 0 {
                extended = candidate
            }
            let distance = editDistance(Array(typed.utf8), Array(candidate.utf8))
            if distance <= limit, distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        return best?.name ?? extended
    }

    /// " (did you mean X?)", or nothing.
    static func hint(for typed: String, in candidates: some Sequence<String>) -> String {
        nearest(to: typed, in: candidates).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
    /// transpositions each cost one. Names are short (under 40 bytes), so the full table is fine.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { value = min(value, table[i - 2][j - 2] + 1) }
                table[i][j] = value
            }
        }
        return table[a.count][b.count]
    }
}
