public import Foundation
import Glibc
public import TetherCrypto
import TetherSync
import TetherEncoding

/// A device's persistent state (keys, pairing, room secret) in a directory the caller chooses:
/// the directory is owner-only (0700), every file owner-only (0600), and each write lands whole
/// or not at all (temporary file, fsync, rename, fsync of the directory), so a crash never
/// leaves half a key behind.
public final class StateDirectory: Sendable {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case io(String)
        /// A stored file exists but is not what it should be; it is left untouched for the user.
        case corrupt(String)

        public var description: String {
            switch self {
            case let .io(what): "state directory: \(what)"
            case let .corrupt(name): "state file \(name) is damaged; remove it to start over"
            }
        }
    }

    public let url: URL

    public init(_ url: URL) throws(Failure) {
        self.url = url
        guard mkdir(url.path, 0o700) == 0 || errno == EEXIST else { throw .io("cannot create \(url.path): \(String(cString: strerror(errno)))") }
        // An existing file is not tightened and written into as if it were the directory.
        guard PathName.isDirectory(url.path) else { throw .io("\(url.path) is not a directory") }
        // An existing directory is tightened too: keys must never be readable by others.
        guard chmod(url.path, 0o700) == 0 else { throw .io("cannot restrict \(url.path)") }
    }

    /// The state directory at `path` as a person typed it, relative to the working directory
    /// (a bare name such as `A` included) or absolute, its missing parents created. The root
    /// directory is refused: it would be made owner-only.
    public convenience init(path: String) throws(Failure) {
        guard !path.isEmpty else { throw .io("no directory given") }
        let url = URL(fileURLWithPath: path).standardizedFileURL
        guard url.path != "/" else { throw .io("/ cannot be a state directory") }
        try Self.makeDirectories(PathName.parent(of: path))
        try self.init(url)
    }

    /// `mkdir -p`: `path` and its missing parents, with the umask's modes (only the state
    /// directory itself is owner-only); the first that cannot be made says why.
    static func makeDirectories(_ path: String) throws(Failure) {
        if let kind = PathName.kind(path) {
            guard kind == .directory else { throw .io("\(path) is not a directory") }
            return
        }
        let parent = PathName.parent(of: path)
        if parent != path { try makeDirectories(parent) }
        guard mkdir(path, 0o777) == 0 || errno == EEXIST else { throw .io("cannot create \(path): \(String(cString: strerror(errno)))") }
    }

    private func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    public func read(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path(name)).map(Array.init)
    }

    /// Replaces `name` atomically with `bytes` (mode 0600).
    public func write(_ name: String, _ bytes: [UInt8]) throws(Failure) {
        let temporary = try writeTemporary(name, bytes)
        guard rename(temporary, path(name)) == 0 else {
            unlink(temporary)
            throw .io("cannot store \(name)")
        }
        syncDirectory()
    }

    /// Stores `bytes` as `name` (mode 0600) only if no `name` exists yet, atomically: false when
    /// one does, which is then left as it is. Two processes making the same key at once thus
    /// agree on one of them instead of the later silently replacing the earlier.
    public func create(_ name: String, _ bytes: [UInt8]) throws(Failure) -> Bool {
        let temporary = try writeTemporary(name, bytes)
        defer { unlink(temporary) }
        guard link(temporary, path(name)) == 0 else {
            if errno == EEXIST { return false }
            throw .io("cannot store \(name)")
        }
        syncDirectory()
        return true
    }

    /// Whether `name` exists (readable or not): a file `read` cannot return is not an absent one.
    public func exists(_ name: String) -> Bool {
        var status = stat()
        return lstat(path(name), &status) == 0
    }

    /// Deletes `name` durably; a `name` that does not exist is already deleted.
    public func delete(_ name: String) throws(Failure) {
        guard unlink(path(name)) == 0 || errno == ENOENT else { throw .io("cannot delete \(name): \(String(cString: strerror(errno)))") }
        syncDirectory()
    }

    /// `bytes` in a fresh temporary file beside `name`, written and fsynced; returns its path.
    private func writeTemporary(_ name: String, _ bytes: [UInt8]) throws(Failure) -> String {
        // Unique per write, so writes from several threads never share (and mix) one file.
        let temporary = path(".\(name).tmp-\(getpid())-\(Hex.encode(SecureRandom.bytes(8)))")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot write \(name)") }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            guard written > 0 else {
                close(fd)
                unlink(temporary)
                throw .io("cannot write \(name)")
            }
            offset += written
        }
        let synced = fsync(fd) == 0
        guard close(fd) == 0, synced else {
            unlink(temporary)
            throw .io("cannot store \(name)")
        }
        return temporary
    }

    private func syncDirectory() {
        let directory = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }

    public func remove(_ name: String) { unlink(path(name)) }

    /// The device's Noise static key: generated once, then always the same.
    public func staticKey() throws(Failure) -> X25519.PrivateKey {
        let name = "noise-static-private-key"
        if let stored = read(name) {
            guard let key = try? X25519.PrivateKey(rawRepresentation: stored) else { throw .corrupt(name) }
            return key
        }
        let key = X25519.PrivateKey()
        try write(name, key.rawRepresentation)
        return key
    }
}
