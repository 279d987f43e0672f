import Foundation
import TetherSync

/// What a handler or delegate heard, in order, from whatever thread it runs on; tests wait on it
/// from their own thread. Open, so a delegate type can be one.
open class WaitableLog<Event: Sendable>: @unchecked Sendable {  // open for delegates to subclass; its one stored property is a Locked
    private let events = Locked<[Event]>([])

    public init() {}

    public func append(_ event: Event) { events.withLock { $0.append(event) } }

    public var all: [Event] { events.withLock { $0 } }

    /// The first event `match` maps to a value, waiting up to `seconds` for it.
    public func first<T>(within seconds: Double, _ match: (Event) -> T?) -> T? {
        values(within: seconds, atLeast: 1, match).first
    }

    /// Every value `match` maps an event to, once there are at least `count` of them or when
    /// `seconds` have passed.
    public func values<T>(within seconds: Double, atLeast count: Int, _ match: (Event) -> T?) -> [T] {
        var seen: [T] = []
        _ = Eventually.holds(within: seconds) {
            seen = all.compactMap(match)
            return seen.count >= count
        }
        return seen
    }
}
