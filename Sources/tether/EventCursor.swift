import Foundation
import TetherSync

/// Events of one demo device, waited for in order: each `next` takes the first matching event
/// after the previous one it took, so a narration reads the device's story front to back.
final class EventCursor<Event: Sendable>: Sendable {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    /// The events so far and the index of the first one not yet taken.
    private let log = Locked<(events: [Event], cursor: Int)>(([], 0))

    func append(_ event: Event) { log.withLock { $0.events.append(event) } }

    /// The first event from the cursor on that `match` accepts (the cursor moves past it).
    func next<T: Sendable>(within seconds: Double = 30, _ what: String, _ match: (Event) -> T?) async throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let found: T? = log.withLock { log in
                while log.cursor < log.events.count {
                    let event = log.events[log.cursor]
                    log.cursor += 1
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
