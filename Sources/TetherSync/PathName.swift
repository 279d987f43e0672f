import Glibc

/// A file system path as a person typed it: relative to the working directory (a bare name such
/// as `A` included) or absolute, read lexically as the shell reads it.
public enum PathName {
    /// The directory holding `path`: "." for a bare name (`A`, `A/`), "/" for a name under the
    /// root. Foundation's `deletingLastPathComponent` trapped on a one-character bare name on
    /// Linux (`tether id --state A`), so no path the user typed goes through it.
    public static func parent(of path: String) -> String {
        var name = Substring(path)
        while name.count > 1, name.hasSuffix("/") { name = name.dropLast() }
        guard let slash = name.lastIndex(of: "/") else { return "." }
        var parent = name[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
        return parent.isEmpty ? "/" : String(parent)
    }

    /// What a path names: a directory, or anything else (a file, a device, a socket).
    public enum Kind: Sendable, Equatable {
        case directory
        case other
    }

    /// What `path` names (links followed), nil if nothing is there.
    public static func kind(_ path: String) -> Kind? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT == S_IFDIR ? .directory : .other
    }

    /// Whether `path` names a directory (links followed).
    public static func isDirectory(_ path: String) -> Bool { kind(path) == .directory }
}
