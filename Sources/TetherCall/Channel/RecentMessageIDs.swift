/// The last `capacity` message ids inserted: a ring for their order and a map for membership,
/// so memory stays bounded over a session of up to 100,000 frames.
struct RecentMessageIDs: Sendable {
    let capacity: Int
    private var ring: [(id: MessageID, serial: UInt64)] = []
    private var next = 0
    /// Each member's serial, so evicting an id's old ring slot cannot drop a newer insertion.
    private var members: [MessageID: UInt64] = [:]
    private var serial: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    func contains(_ id: MessageID) -> Bool { members[id] != nil }

    /// Members now (at most `capacity`).
    var count: Int { members.count }

    /// The members, oldest first.
    var ordered: [MessageID] {
        let slots = ring.count < capacity ? ring[...] : ring[next...] + ring[..<next]
        return slots.filter { members[$0.id] == $0.serial }.map(\.id)
    }

    mutating func insert(_ id: MessageID) {
        serial += 1
        if ring.count < capacity {
            ring.append((id, serial))
        } else {
            let evicted = ring[next]
            if members[evicted.id] == evicted.serial { members[evicted.id] = nil }
            ring[next] = (id, serial)
            next = (next + 1) % capacity
        }
        members[id] = serial
    }

    /// Removes `id`; false if it was not a member.
    mutating func remove(_ id: MessageID) -> Bool { members.removeValue(forKey: id) != nil }
}
