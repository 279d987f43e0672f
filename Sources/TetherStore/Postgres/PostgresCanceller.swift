import CPostgres
import Dispatch
import Foundation
import TetherSync

/// Sends PostgreSQL cancel requests for calls that missed their deadline, on a thread of its own.
/// libpq 15's `PQcancel` connects to the server and then waits, with no timeout, for it to close
/// the cancel connection — against a hung server that wait is as long as the hang, so it must
/// never run on a store lane. One thread serves the whole process; requests beyond
/// `maxPending` are dropped (the server's own `statement_timeout` still ends the statement once
/// it runs again), so a long hang costs one blocked thread and a bounded queue, nothing more.
final class PostgresCanceller: Sendable {
    static let shared = PostgresCanceller()

    /// Cancels waiting to be sent: one per store lane of a few pools, with room to spare.
    static let maxPending = 16

    private struct Request: @unchecked Sendable {   // a PGcancel is used by the canceller thread only
        let cancel: OpaquePointer
    }

    private let pending = Locked<[Request]>([])
    private let wake = DispatchSemaphore(value: 0)

    private init() {
        DedicatedThread.start(name: "tether-pg-cancel", joinable: false) { [self] in run() }
    }

    /// Asks the server to cancel what `connection` runs. Copies what the request needs now, so
    /// the connection itself may be closed at once.
    func cancel(_ connection: OpaquePointer) {
        guard let cancel = PQgetCancel(connection) else { return }
        let queued = pending.withLock { pending in
            guard pending.count < Self.maxPending else { return false }
            pending.append(Request(cancel: cancel))
            return true
        }
        if queued {
            wake.signal()
        } else {
            PQfreeCancel(cancel)
        }
    }

    private func run() {
        var message = [CChar](repeating: 0, count: 256)
        while true {
            wake.wait()
            guard let request = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            // The outcome needs no action: a statement that already ended has nothing to cancel.
            _ = PQcancel(request.cancel, &message, Int32(message.count))
            PQfreeCancel(request.cancel)
        }
    }
}
