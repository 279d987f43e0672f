import Glibc
import TetherSync

/// Paths as operators type them: relative to the working directory (a bare name such as `A`
/// included) or absolute. Each is checked at start-up, so a mistyped path is one line naming the
/// setting and exit 2, never a later failure deep in OpenSSL or SQLite.
extension SettingParser where Value == String? {
    /// A file the service reads (a certificate, a key, a CA, a shard map): it exists, is not a
    /// directory, and this process may read it.
    public static var readableFile: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            try PathCheck.readableFile(text)
            return text
        }
    }
}

extension SettingParser where Value == String {
    /// A directory the service keeps files in, made at start if missing (`*_ACME_DIR`): a path,
    /// and not an existing file.
    public static var directoryPath: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard !text.isEmpty else { throw InvalidSettingValue("needs a directory path") }
            if let kind = PathName.kind(text), kind != .directory { throw InvalidSettingValue("\(text) is not a directory") }
            return text
        }
    }

    /// `RELAY_DB` / `PUSH_DB`: `:memory:`, a `postgres://` URL, or a SQLite file whose directory
    /// exists (SQLite makes the file, not its directory). An empty path is refused: SQLite would
    /// open a temporary database and keep nothing.
    public static var databaseLocation: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            if text == ":memory:" || text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") { return text }
            if let scheme = text.range(of: "://").map({ text[..<$0.lowerBound] }) {
                throw InvalidSettingValue("\(scheme):// is not a database Tether can use: give a SQLite file path, a postgres:// URL or :memory:")
            }
            guard !text.isEmpty else { throw InvalidSettingValue("needs a SQLite file path, a postgres:// URL or :memory:") }
            guard !text.hasSuffix("/"), !PathName.isDirectory(text) else { throw InvalidSettingValue("\(text) is a directory, not a database file") }
            let parent = PathName.parent(of: text)
            guard let kind = PathName.kind(parent) else { throw InvalidSettingValue("no directory \(parent) for \(text)") }
            guard kind == .directory else { throw InvalidSettingValue("\(parent) is not a directory, so \(text) cannot be made") }
            return text
        }
    }
}

/// The checks behind the path parsers, on the path's own text.
enum PathCheck {
    static func readableFile(_ path: String) throws(InvalidSettingValue) {
        guard !path.isEmpty else { throw InvalidSettingValue("needs a file path") }
        guard let kind = PathName.kind(path) else { throw InvalidSettingValue("cannot read \(path): \(String(cString: strerror(errno)))") }
        guard kind != .directory else { throw InvalidSettingValue("\(path) is a directory, not a file") }
        guard access(path, R_OK) == 0 else { throw InvalidSettingValue("cannot read \(path): \(String(cString: strerror(errno)))") }
    }
}
