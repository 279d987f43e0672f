import Foundation

/// Events of one demo device, waited for in order: each `next` takes the first matching event
/// after the previous one it took, so a narration reads the device's story front to back.
final class EventCursor<Event: Sendable>: @unchecked Sendable {  // `lock` guards every member
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    private let lock = NSLock()
    private var events: [Event] = []
    private var cursor = 0

    func append(_ event: Event) { lock.withLock { events.append(event) } }

    /// The first event from the cursor on that `match` accepts (the cursor moves past it).
    func next<T>(within seconds: Double = 30, _ what: String, _ match: (Event) -> T?) async throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let found: T? = lock.withLock {
                while cursor < events.count {
                    let event = events[cursor]
                    cursor += 1
                    if let value = match(event) { return value }
                }
                return nil
            }
            if let found { return found }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw Missing(description: "no \(what) within \(Int(seconds)) s")
    }
}
