import Foundation
public import TetherDevice

/// The SDK's calling identity in its state directory (signaling.md §3.3): the 64 bytes
/// `seed ‖ agreement private key` in one owner-only file, made on first use and the same ever
/// after, until `erase()`.
///
/// A file that is there but unusable is reported, never replaced: replacing it would silently
/// change the user's ID, and every contact holding the old one would lose them.
public struct IdentityStore: Sendable {
    /// The file's name in the state directory.
    public static let fileName = "call-identity"

    /// The owner-only directory the identity lives in.
    public let directory: StateDirectory

    /// A store in `directory`; nothing is read or written until asked.
    public init(directory: StateDirectory) {
        self.directory = directory
    }

    /// Where the identity lives (for messages; the bytes themselves are never shown).
    public var path: String { directory.url.appendingPathComponent(Self.fileName).path }

    /// The stored identity; nil when there is none yet.
    public func load() throws(IdentityStoreError) -> CallIdentity? {
        guard let bytes = directory.read(Self.fileName) else {
            if directory.exists(Self.fileName) { throw .unreadable(path: path) }
            return nil
        }
        guard bytes.count == CallIdentity.storedByteCount, let identity = try? CallIdentity(stored: bytes) else {
            throw .damaged(path: path, byteCount: bytes.count)
        }
        return identity
    }

    /// The stored identity, or a new one stored now (`created`). When another process makes one
    /// at the same moment, both end up with the same identity: the first stored.
    public func loadOrCreate() throws(IdentityStoreError) -> (identity: CallIdentity, created: Bool) {
        if let identity = try load() { return (identity, false) }
        let identity = CallIdentity()
        let stored: Bool
        do throws(StateDirectory.Failure) { stored = try directory.create(Self.fileName, identity.stored) } catch { throw .storage(error.description) }
        if stored { return (identity, true) }
        guard let existing = try load() else { throw .storage("the identity file appeared and vanished while it was being made; try again") }
        return (existing, false)
    }

    /// Panic erasure (§3.3): the identity is gone, and the next `loadOrCreate()` makes new keys
    /// and so a new ID. Left-over temporary files of an interrupted write hold keys too and go
    /// with it. Erasing when nothing is stored is not an error.
    public func erase() throws(IdentityStoreError) {
        let prefix = ".\(Self.fileName).tmp-"
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []).filter { $0.hasPrefix(prefix) }
        do throws(StateDirectory.Failure) {
            for name in leftovers { try directory.delete(name) }
            try directory.delete(Self.fileName)
        } catch {
            throw .storage(error.description)
        }
    }

    /// `erase()`, then a new identity stored: what a user asks for to get a new ID.
    public func replace() throws(IdentityStoreError) -> CallIdentity {
        try erase()
        let (identity, _) = try loadOrCreate()
        return identity
    }
}

/// Why the stored identity could not be used.
public enum IdentityStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file is there but is not 64 bytes. It is left untouched for the user.
    case damaged(path: String, byteCount: Int)
    /// The file is there but cannot be read (permissions, a directory in its place).
    case unreadable(path: String)
    /// The state directory refused a write or a deletion.
    case storage(String)

    /// A sentence for the user naming the file and what is wrong with it (never its bytes).
    public var description: String {
        switch self {
        case let .damaged(path, count):
            "the identity file \(path) is damaged (\(count) bytes where \(CallIdentity.storedByteCount) are expected); it was left untouched"
        case let .unreadable(path): "the identity file \(path) exists but cannot be read"
        case let .storage(what): what
        }
    }
}
