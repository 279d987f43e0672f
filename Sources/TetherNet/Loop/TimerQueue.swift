/// Deadlines in a binary min-heap. Cancelling forgets the entry's id; the entry itself is
/// dropped when it reaches the top, so cancel is O(1) and nothing is searched.
public struct TimerQueue<Payload>: Sendable where Payload: Sendable {
    public struct ID: Hashable, Sendable {
        let raw: UInt64
    }

    private struct Entry: Sendable {
        let deadline: UInt64
        let sequence: UInt64
        let payload: Payload
    }

    private var heap: [Entry] = []
    private var live: Set<UInt64> = []
    private var nextSequence: UInt64 = 0

    public init() {}

    /// Live timers.
    public var count: Int { live.count }

    @discardableResult
    public mutating func schedule(at deadline: UInt64, _ payload: Payload) -> ID {
        nextSequence += 1
        heap.append(Entry(deadline: deadline, sequence: nextSequence, payload: payload))
        live.insert(nextSequence)
        siftUp(heap.count - 1)
        return ID(raw: nextSequence)
    }

    public mutating func cancel(_ id: ID) { live.remove(id.raw) }

    /// The earliest live deadline.
    public mutating func nextDeadline() -> UInt64? {
        dropCancelledTop()
        return heap.first?.deadline
    }

    /// Removes and returns every live payload due at `now`, earliest first (ties in schedule order).
    public mutating func popExpired(now: UInt64) -> [Payload] {
        var due: [Payload] = []
        while true {
            dropCancelledTop()
            guard let top = heap.first, top.deadline <= now else { return due }
            live.remove(top.sequence)
            due.append(removeTop().payload)
        }
    }

    private mutating func dropCancelledTop() {
        while let top = heap.first, !live.contains(top.sequence) { _ = removeTop() }
    }

    private mutating func removeTop() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        return top
    }

    private func before(_ a: Entry, _ b: Entry) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, before(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, before(heap[right], heap[smallest]) { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
