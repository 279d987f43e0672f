import Dispatch
import TetherSync

/// The associations usrsctp may call back into, by the number that is their AF_CONN address
/// and ulp_info. Entries hold the association weakly and are looked up on usrsctp's threads, so
/// those threads never hold (and so never release last) a strong reference: an association is
/// only ever deinitialised on its queue or its owner's thread, never inside usrsctp.
enum SCTPRegistry {
    struct Entry: Sendable {
        let queue: DispatchQueue
        weak var association: DataChannelAssociation?
    }

    private struct Table {
        var entries: [UInt: Entry] = [:]
        /// Numbers are never reused, so a late callback for a closed association cannot reach a
        /// newer one.
        var lastID: UInt = 0
    }

    private static let table = Locked(Table())

    static func allocateID() -> UInt {
        table.withLock { table in
            table.lastID += 1
            return table.lastID
        }
    }

    static func insert(_ id: UInt, _ entry: Entry) {
        table.withLock { $0.entries[id] = entry }
    }

    static func remove(_ id: UInt) {
        table.withLock { _ = $0.entries.removeValue(forKey: id) }
    }

    static func entry(_ id: UInt) -> Entry? {
        table.withLock { $0.entries[id] }
    }

    /// How many associations are registered (for the leak tests).
    static var count: Int {
        table.withLock { $0.entries.count }
    }

    /// Runs `work` on the association's queue, if it is still registered and alive then.
    static func hop(_ id: UInt, _ work: @escaping @Sendable (DataChannelAssociation) -> Void) {
        guard let entry = entry(id) else { return }
        entry.queue.async {
            if let association = entry.association { work(association) }
        }
    }
}
