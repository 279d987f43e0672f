import Dispatch
import Foundation

/// A few libpq connections shared by a service's store lanes (and its chores). A lane takes one
/// for a call and gives it back; a connection the server dropped is closed and a new one made on
/// the next call.
///
/// Every call has a deadline of the node's own (`Settings.callTimeoutMs`, covering the wait for a
/// connection, the connect and every statement), so a database that hangs instead of refusing
/// turns into prompt failures, not requests that wait as long as the hang. Two back-offs keep a
/// lane from spending a whole deadline per queued call while the server cannot answer: after a
/// failed connect no new connection is tried for a while, and after a call that missed its
/// deadline no call at all is tried for a while (0.1 s doubling to 5 s; a call that succeeds
/// ends both). Calls in between fail at once, so a node with its database down or hung answers
/// "internal error" quickly and keeps splicing.
public final class PostgresPool: @unchecked Sendable {   // `idle`, `open`, `backoff` and `stall` only under `condition`
    /// What a pool is given: the URL and the limits every connection gets.
    public struct Settings: Sendable {
        public var url: String
        /// Connections at most: one per store lane and one for chores.
        public var size: Int
        /// The node's deadline for one store call (waiting for a connection, connecting, and every
        /// statement of the call), ms; also the server's `statement_timeout`, so a statement the
        /// node gave up on does not run on much longer there.
        public var callTimeoutMs: Int

        public init(url: String, size: Int = StoreExecutor<Int>.defaultLanes + 1, callTimeoutMs: Int = PostgresPool.defaultCallTimeoutMs) {
            self.url = url
            self.size = max(1, size)
            self.callTimeoutMs = max(1, callTimeoutMs)
        }
    }

    /// 2 s: a statement of Tether's answers in milliseconds on a healthy server, even a loaded one;
    /// a call still waiting after 2 s is waiting on a hang. With one call ahead of it on its lane,
    /// a request is answered within 2 × 2 s — inside the 4–5 s a client waits.
    public static let defaultCallTimeoutMs = 2_000
    /// Migrations may rewrite a table: their calls get this long, and no statement timeout.
    static let migrationTimeoutMs = 120_000
    static let firstBackoffNanos: UInt64 = 100_000_000
    public static let maxBackoffNanos: UInt64 = 5_000_000_000

    private struct Backoff {
        var until: UInt64
        var delay: UInt64
        var error: StoreError

        /// The next back-off after `previous` (doubling) that began at `now`.
        init(after previous: Backoff?, now: UInt64, error: StoreError) {
            delay = min(PostgresPool.maxBackoffNanos, previous.map { $0.delay * 2 } ?? PostgresPool.firstBackoffNanos)
            until = now + delay
            self.error = error
        }
    }

    public let settings: Settings
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    /// After a failed connect: no connect is tried before `until` (monotonic ns); calls that need
    /// a new connection fail with `error`.
    private var backoff: Backoff?
    /// After a call that missed its deadline: no call is tried before `until`.
    private var stall: Backoff?

    /// Connects once, so a wrong URL or an unreachable server is reported at start-up.
    public init(_ settings: Settings) throws(StoreError) {
        self.settings = settings
        let first = try PostgresConnection(url: settings.url, statementTimeoutMs: settings.callTimeoutMs,
                                           deadline: Self.deadline(afterMs: settings.callTimeoutMs))
        idle = [first]
        open = 1
    }

    /// Runs `body` with a connection of its own, within the call's deadline (`timeoutMs`, the
    /// settings' by default). A connection that broke or timed out during `body` is closed, not
    /// given back; one whose statement merely failed goes back for the next call.
    func withConnection<R>(timeoutMs: Int? = nil, _ body: (PostgresConnection) throws(StoreError) -> R) throws(StoreError) -> R {
        let deadline = Self.deadline(afterMs: timeoutMs ?? settings.callTimeoutMs)
        let connection = try checkOut(deadline: deadline)
        connection.deadline = deadline
        do {
            let result = try body(connection)
            checkIn(connection)
            return result
        } catch {
            checkIn(connection)
            throw error
        }
    }

    /// Runs one statement on a connection of its own: what most store calls are.
    @discardableResult
    func execute(_ name: String, _ sql: String, _ parameters: [String?] = []) throws(StoreError) -> PostgresRows {
        try withConnection { (connection) throws(StoreError) in try connection.execute(name, sql, parameters) }
    }

    /// Whether calls are failing fast: the last connect failed, or the last call missed its
    /// deadline, and no call has succeeded since.
    public var isBackingOff: Bool {
        condition.lock()
        defer { condition.unlock() }
        return backoff != nil || stall != nil
    }

    private static func deadline(afterMs milliseconds: Int) -> UInt64 {
        DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
    }

    private func checkOut(deadline: UInt64) throws(StoreError) -> PostgresConnection {
        condition.lock()
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            if let stall, now < stall.until {
                condition.unlock()
                throw stall.error
            }
            if let connection = idle.popLast() {
                // A server that restarted closed its idle connections: replace, don't fail.
                guard connection.isUsableWhenIdle else {
                    open -= 1
                    continue
                }
                condition.unlock()
                return connection
            }
            if open < settings.size {
                if let backoff, now < backoff.until {
                    condition.unlock()
                    throw backoff.error
                }
                open += 1
                condition.unlock()
                return try connect(deadline: deadline)
            }
            guard now < deadline else {
                condition.unlock()
                throw StoreError("database: every connection is busy")
            }
            // Woken by a check-in; the slice only bounds how late a wall-clock step can make it.
            _ = condition.wait(until: Date(timeIntervalSinceNow: min(1, Double(deadline - now) / 1e9)))
        }
    }

    /// Opens a connection (outside the lock: it waits on the network), recording the outcome.
    private func connect(deadline: UInt64) throws(StoreError) -> PostgresConnection {
        do {
            let connection = try PostgresConnection(url: settings.url, statementTimeoutMs: settings.callTimeoutMs, deadline: deadline)
            condition.lock()
            backoff = nil
            condition.unlock()
            return connection
        } catch {
            condition.lock()
            open -= 1
            backoff = Backoff(after: backoff, now: DispatchTime.now().uptimeNanoseconds, error: error)
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    /// Takes a connection back. One still healthy had its call answered (a statement error is an
    /// answer too), so the server answers again and any back-off ends; a call that missed its
    /// deadline starts (or doubles) the stall back-off.
    private func checkIn(_ connection: PostgresConnection) {
        let healthy = connection.isHealthy
        condition.lock()
        if healthy {
            idle.append(connection)
            stall = nil
            backoff = nil
        } else {
            open -= 1
        }
        if connection.timedOut {
            let error = StoreError("database: not answering (a call missed the node's \(settings.callTimeoutMs) ms deadline); failing fast until it is retried")
            stall = Backoff(after: stall, now: DispatchTime.now().uptimeNanoseconds, error: error)
        }
        condition.signal()
        condition.unlock()
    }
}
