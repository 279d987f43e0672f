import TetherSync

/// Registrations read lately, so a push from a busy Mac is checked and sent from the loop that
/// read it, without a store round trip. Only a request that authenticates against the cached
/// record takes this path; anything else (a miss, a bad signature or secret) goes to the store as
/// before, so an unknown id and a known one with a wrong signature still cost the same (push.md
/// §2.5 step 3). A delete in this process drops the entry at once; an entry otherwise lives
/// `lifetime` and never past the process's view of the record (another node sharing the store
/// may delete it meanwhile: the worst case is one more APNs attempt, whose permanent failure
/// deletes it again). Bounded: past `capacity` the whole cache is dropped and refilled by use.
final class RegistrationCache<Value: Sendable>: Sendable {
    /// Fresh enough: a minute.
    static var lifetime: Duration { .seconds(60) }
    let capacity: Int
    private let entries = Locked<[String: (value: Value, at: MonotonicInstant)]>([:])

    init(capacity: Int = 100_000) { self.capacity = capacity }

    func value(for key: String, now: MonotonicInstant) -> Value? {
        entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard now >= entry.at, now - entry.at < Self.lifetime else {
                entries[key] = nil
                return nil
            }
            return entry.value
        }
    }

    func store(_ value: Value, for key: String, now: MonotonicInstant) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil { entries.removeAll(keepingCapacity: true) }
            entries[key] = (value, now)
        }
    }

    func remove(_ key: String) { _ = entries.withLock { $0.removeValue(forKey: key) } }
}
