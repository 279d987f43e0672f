public import Foundation
import Glibc
public import TetherCrypto

/// A device's persistent state (keys, pairing, room secret) in a directory the caller chooses:
/// the directory is owner-only (0700), every file owner-only (0600), and each write lands whole
/// or not at all (temporary file, fsync, rename, fsync of the directory), so a crash never
/// leaves half a key behind.
public final class StateDirectory: @unchecked Sendable {
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
        // An existing directory is tightened too: keys must never be readable by others.
        guard chmod(url.path, 0o700) == 0 else { throw .io("cannot restrict \(url.path)") }
    }

    private func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    public func read(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path(name)).map(Array.init)
    }

    /// Replaces `name` atomically with `bytes` (mode 0600).
    public func write(_ name: String, _ bytes: [UInt8]) throws(Failure) {
        let final = path(name), temporary = path(".\(name).tmp-\(getpid())")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
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
        guard fsync(fd) == 0, close(fd) == 0, rename(temporary, final) == 0 else {
            unlink(temporary)
            throw .io("cannot store \(name)")
        }
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
