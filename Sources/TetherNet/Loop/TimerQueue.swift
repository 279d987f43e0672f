public import TetherSync

/// Deadlines in a binary min-heap. Cancelling frees the payload at once (a cancelled timer
/// must not pin its closure, and what that captures, until its deadline); the bare heap entry is
/// skipped when it reaches the top, and the heap is rebuilt when dead entries outnumber live ones.
public struct TimerQueue<Payload> {
    public struct ID: Hashable, Sendable {
        let raw: UInt64
    }

    private struct Entry: Sendable {
        let deadline: MonotonicInstant
        let sequence: UInt64
    }

    private var heap: [Entry] = []
    private var payloads: [UInt64: Payload] = [:]
    private var nextSequence: UInt64 = 0

    public init() {}

    /// Live timers.
    public var count: Int { payloads.count }

    @discardableResult
    public mutating func schedule(at deadline: MonotonicInstant, _ payload: Payload) -> ID {
        nextSequence += 1
        heap.append(Entry(deadline: deadline, sequence: nextSequence))
        payloads[nextSequence] = payload
        siftUp(heap.count - 1)
        return ID(raw: nextSequence)
    }

    public mutating func cancel(_ id: ID) {
        guard payloads.removeValue(forKey: id.raw) != nil else { return }
        if heap.count > 64, heap.count > 2 * payloads.count { rebuild() }
    }

    /// The earliest live deadline.
    public mutating func nextDeadline() -> MonotonicInstant? {
        dropDeadTop()
        return heap.first?.deadline
    }

    /// Removes and returns every live payload due at `now`, earliest first (ties in schedule order).
    public mutating func popExpired(now: MonotonicInstant) -> [Payload] {
        var due: [Payload] = []
        while true {
            dropDeadTop()
            guard let top = heap.first, top.deadline <= now else { return due }
            _ = removeTop()
            if let payload = payloads.removeValue(forKey: top.sequence) { due.append(payload) }
        }
    }

    private mutating func dropDeadTop() {
        while let top = heap.first, payloads[top.sequence] == nil { _ = removeTop() }
    }

    /// Keeps only live entries and restores the heap order (Floyd's bottom-up heapify).
    private mutating func rebuild() {
        heap.removeAll { payloads[$0.sequence] == nil }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
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

extension TimerQueue: Sendable where Payload: Sendable {}
