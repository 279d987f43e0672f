import Dispatch
import Foundation
import Synchronization
import TetherSync

/// One connection that `LISTEN`s on a channel, on a thread of its own, and calls `changed` when
/// a notification arrives — how every relay node learns a new shard map within milliseconds of
/// its commit rather than at its next poll. The poll stays: a notification sent while this
/// connection was down is lost, so after every (re)connect `changed` is called once to catch up,
/// and a node whose listener cannot connect still adopts maps within the poll period.
/// Reconnects back off like the pool (0.1 s doubling to 5 s). Bounded: one connection, one
/// thread, no queue (notifications are coalesced into one call per wake-up).
public final class PostgresListener: Sendable {
    private let stopped = Atomic(false)

    /// How long one wait lasts: the bound on how late `stop()` is noticed.
    static let waitMs: Int32 = 1_000

    public init(url: String, channel: String, changed: @escaping @Sendable () -> Void) {
        DedicatedThread.start(name: "tether-pg-listen", joinable: false) { [self] in run(url: url, channel: channel, changed: changed) }
    }

    /// The thread ends within a second.
    public func stop() { stopped.store(true, ordering: .releasing) }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func run(url: String, channel: String, changed: @Sendable () -> Void) {
        var delay = PostgresPool.firstBackoffNanos
        while !isStopped {
            do throws(StoreError) {
                let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(PostgresPool.defaultCallTimeoutMs) * 1_000_000
                let connection = try PostgresConnection(url: url, statementTimeoutMs: PostgresPool.defaultCallTimeoutMs, deadline: deadline)
                // A channel name is an identifier: quoted, and ours never holds a quote.
                try connection.run("LISTEN \"\(channel)\"")
                connection.deadline = .max
                delay = PostgresPool.firstBackoffNanos
                changed()
                while !isStopped {
                    if try !connection.notifications(waitingMs: Self.waitMs).isEmpty { changed() }
                }
            } catch {
                // The poll covers the gap; this connection's own trouble needs no log line (the
                // store's calls report an outage once).
                var slept: UInt64 = 0
                while slept < delay, !isStopped {
                    usleep(100_000)
                    slept += 100_000_000
                }
                delay = min(PostgresPool.maxBackoffNanos, delay * 2)
            }
        }
    }
}
