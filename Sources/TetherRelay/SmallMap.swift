/// A map for a handful of entries — a room's sockets (two slots and at most four pending) — kept
/// in one array: a linear search over so few beats hashing, and an empty or one-entry map costs
/// a fraction of a `Dictionary`'s storage, which every resident room would otherwise pay for.
/// Entries stay in insertion order.
struct SmallMap<Key: Equatable, Value>: Sequence {
    typealias Element = (key: Key, value: Value)
    private var entries: [Element] = []

    init() {}

    subscript(key: Key) -> Value? {
        get { entries.first { $0.key == key }?.value }
        set {
            if let index = entries.firstIndex(where: { $0.key == key }) {
                if let newValue { entries[index].value = newValue } else { removeValue(forKey: key) }
            } else if let newValue {
                entries.append((key, newValue))
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
        let value = entries[index].value
        entries.remove(at: index)
        // An emptied map gives its storage back: an idle room holds nothing here.
        if entries.isEmpty { entries = [] }
        return value
    }

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var keys: [Key] { entries.map(\.key) }
    var values: [Value] { entries.map(\.value) }

    func makeIterator() -> IndexingIterator<[Element]> { entries.makeIterator() }
}
