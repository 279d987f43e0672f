import Foundation

/// What a handler or delegate heard, in order, from whatever thread it runs on; tests wait on it
/// from their own thread. Open, so a delegate type can be one.
open class WaitableLog<Event: Sendable>: @unchecked Sendable {  // `lock` guards `events`
    private let lock = NSLock()
    private var events: [Event] = []

    public init() {}

    public func append(_ event: Event) { lock.withLock { events.append(event) } }

    public var all: [Event] { lock.withLock { events } }

    /// The first event `match` maps to a value, waiting up to `seconds` for it.
    public func first<T>(within seconds: Double, _ match: (Event) -> T?) -> T? {
        values(within: seconds, atLeast: 1, match).first
    }

    /// Every value `match` maps an event to, once there are at least `count` of them or when
    /// `seconds` have passed.
    public func values<T>(within seconds: Double, atLeast count: Int, _ match: (Event) -> T?) -> [T] {
        let deadline = Date().addingTimeInterval(seconds)
        var seen: [T] = []
        repeat {
            seen = all.compactMap(match)
            if seen.count >= count { return seen }
            Thread.sleep(forTimeInterval: 0.01)
        } while Date() < deadline
        return seen
    }
}
