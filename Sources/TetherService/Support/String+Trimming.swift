extension StringProtocol {
    /// Without leading and trailing whitespace (Unicode's notion: env-files and header values
    /// are trimmed as the reference's JavaScript `trim()` does).
    func trimmingWhitespace() -> Substring {
        let s = Substring(self)
        guard let start = s.firstIndex(where: { !$0.isWhitespace }) else { return s[s.endIndex...] }
        return s[start...s.lastIndex(where: { !$0.isWhitespace })!]
    }
}
