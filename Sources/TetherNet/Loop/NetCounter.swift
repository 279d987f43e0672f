import Synchronization

/// A monotonic event count that loop threads bump and any thread may read (a metrics scrape).
public final class NetCounter: Sendable {
    private let count = Atomic<Int>(0)

    public init() {}

    public var value: Int { count.load(ordering: .relaxed) }

    func increment() { count.wrappingAdd(1, ordering: .relaxed) }
}
