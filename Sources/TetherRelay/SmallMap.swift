/// A map for a handful of entries — a room's sockets (two slots and at most four pending) — with
/// the first entry inline and the rest in one array: a linear search over so few beats hashing,
/// and a parked room's one socket costs no allocation here at all (measured at 1,000 parked
/// Macs: a one-entry array was 96 B of heap for a room's members and 80 B for its machine's
/// sockets, against 56 B and 32 B inline). Entries stay in insertion order.
struct SmallMap<Key: Equatable, Value>: Sequence {
    typealias Element = (key: Key, value: Value)
    /// nil only while `rest` is empty too.
    private var head: Element?
    private var rest: [Element] = []

    init() {}

    subscript(key: Key) -> Value? {
        get {
            if let head, head.key == key { return head.value }
            return rest.first { $0.key == key }?.value
        }
        set {
            guard let newValue else {
                removeValue(forKey: key)
                return
            }
            if head == nil || head?.key == key {
                head = (key, newValue)
            } else if let index = rest.firstIndex(where: { $0.key == key }) {
                rest[index].value = newValue
            } else {
                rest.append((key, newValue))
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        if let current = head, current.key == key {
            head = rest.isEmpty ? nil : rest.removeFirst()
            if rest.isEmpty { rest = [] }   // storage given back: a parked room holds none
            return current.value
        }
        guard let index = rest.firstIndex(where: { $0.key == key }) else { return nil }
        let value = rest.remove(at: index).value
        if rest.isEmpty { rest = [] }
        return value
    }

    var isEmpty: Bool { head == nil }
    var count: Int { head == nil ? 0 : 1 + rest.count }
    var keys: [Key] { map(\.key) }
    var values: [Value] { map(\.value) }

    func makeIterator() -> Iterator { Iterator(head: head, rest: rest.makeIterator()) }

    struct Iterator: IteratorProtocol {
        fileprivate var head: Element?
        fileprivate var rest: IndexingIterator<[Element]>

        mutating func next() -> Element? {
            if let first = head {
                head = nil
                return first
            }
            return rest.next()
        }
    }
}
