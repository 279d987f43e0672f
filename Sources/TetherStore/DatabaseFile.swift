import Glibc

/// Database files hold secrets (registration tokens, push relay secrets), so they are created
/// owner-only (0600) whatever the process umask; SQLite gives its `-wal` and `-shm` files the
/// main file's permissions. An existing file is left as the operator set it.
enum DatabaseFile {
    /// Creates `path` empty with mode 0600 unless it exists (or is SQLite's `:memory:` or a URI).
    static func createOwnerOnly(_ path: String) {
        guard path != ":memory:", !path.isEmpty, !path.hasPrefix("file:") else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
    }
}
