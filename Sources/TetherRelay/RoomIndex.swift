public import TetherWire

/// Resident rooms by name, at 16 bytes an entry instead of a `[RoomName: Value]`'s 40: entries
/// are keyed by the name's per-process seeded hash, and each value knows its own name, which
/// is checked on every lookup. A client cannot aim a name at another room's hash (the seed is
/// random per process); the odd true 64-bit collision goes to a small overflow map, so two
/// rooms are never confused.
public struct RoomIndex<Value: AnyObject> {
    private let name: (Value) -> RoomName
    private let hash: (RoomName) -> Int
    private var byHash: [Int: Value] = [:]
    private var overflow: [RoomName: Value] = [:]

    /// - Parameters:
    ///   - name: the room a value belongs to.
    ///   - hash: the seeded hash (tests force collisions with their own).
    public init(hash: @escaping (RoomName) -> Int = { $0.hashValue }, name: @escaping (Value) -> RoomName) {
        self.name = name
        self.hash = hash
    }

    /// The resident value of `room`, if any.
    public subscript(room: RoomName) -> Value? {
        if let value = byHash[hash(room)], name(value) == room { return value }
        return overflow.isEmpty ? nil : overflow[room]
    }

    /// Adds `value` under its own name (which must not be present yet).
    public mutating func insert(_ value: Value) {
        let room = name(value)
        let key = hash(room)
        if byHash[key] == nil { byHash[key] = value } else { overflow[room] = value }
    }

    /// Removes the value for `room`, if present.
    public mutating func remove(_ room: RoomName) {
        let key = hash(room)
        if let value = byHash[key], name(value) == room {
            byHash[key] = nil
            // Keep the fast path for a colliding room that is still resident.
            if let moved = overflow.first(where: { hash($0.key) == key }) {
                overflow[moved.key] = nil
                byHash[key] = moved.value
            }
        } else {
            overflow[room] = nil
        }
    }

    /// How many rooms are resident.
    public var count: Int { byHash.count + overflow.count }
    /// Every resident value, in no particular order.
    public var values: [Value] { Array(byHash.values) + Array(overflow.values) }
}
