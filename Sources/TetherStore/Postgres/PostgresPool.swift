import Dispatch
import Foundation

/// A few libpq connections shared by a service's store lanes (and its chores). A lane takes one
/// for a call and gives it back; a connection the server dropped is closed and a new one made on
/// the next call. While the server cannot be reached, reconnecting backs off (0.1 s doubling to
/// 5 s) and calls in between fail at once: a lane never waits out a connect timeout per call, so
/// a node with its database down answers "internal error" quickly and keeps splicing.
public final class PostgresPool: @unchecked Sendable {   // `idle`, `open` and `backoff` only under `condition`
    /// What a pool is given: the URL and the limits every connection gets.
    public struct Settings: Sendable {
        public var url: String
        /// Connections at most: one per store lane and one for chores.
        public var size: Int
        /// A statement that runs longer fails (SQLSTATE 57014) and frees its lane.
        public var statementTimeoutMs: Int
        public var connectTimeoutSeconds: Int

        public init(url: String, size: Int = StoreExecutor<Int>.defaultLanes + 1, statementTimeoutMs: Int = 5_000, connectTimeoutSeconds: Int = 3) {
            self.url = url
            self.size = max(1, size)
            self.statementTimeoutMs = statementTimeoutMs
            self.connectTimeoutSeconds = connectTimeoutSeconds
        }
    }

    /// How long a call waits for a free connection before it fails: longer than any statement may
    /// run, so it only fires when every connection is stuck.
    static let checkoutWaitSeconds = 10.0
    static let firstBackoffNanos: UInt64 = 100_000_000
    public static let maxBackoffNanos: UInt64 = 5_000_000_000

    public let settings: Settings
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    /// While set, no connect is tried before `until` (monotonic ns) and calls fail with `error`.
    private var backoff: (until: UInt64, delay: UInt64, error: StoreError)?

    /// Connects once, so a wrong URL or an unreachable server is reported at start-up.
    public init(_ settings: Settings) throws(StoreError) {
        self.settings = settings
        let first = try PostgresConnection(url: settings.url, statementTimeoutMs: settings.statementTimeoutMs,
                                           connectTimeoutSeconds: settings.connectTimeoutSeconds)
        idle = [first]
        open = 1
    }

    /// Runs `body` with a connection of its own. A connection that broke during `body` is closed,
    /// not given back; one whose statement merely failed goes back for the next call.
    func withConnection<R>(_ body: (PostgresConnection) throws(StoreError) -> R) throws(StoreError) -> R {
        let connection = try checkOut()
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

    /// Whether the last attempt to reach the server failed and has not been followed by a success.
    public var isBackingOff: Bool {
        condition.lock()
        defer { condition.unlock() }
        return backoff != nil
    }

    private func checkOut() throws(StoreError) -> PostgresConnection {
        condition.lock()
        // Monotonic: a wall-clock step must neither cut the wait short nor stretch it.
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(Self.checkoutWaitSeconds * 1e9)
        while true {
            if let connection = idle.popLast() {
                condition.unlock()
                return connection
            }
            if open < settings.size {
                if let backoff, DispatchTime.now().uptimeNanoseconds < backoff.until {
                    condition.unlock()
                    throw backoff.error
                }
                open += 1
                condition.unlock()
                return try connect()
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else {
                condition.unlock()
                throw StoreError("database: every connection is busy")
            }
            // Woken by a check-in; the slice only bounds how late a wall-clock step can make it.
            _ = condition.wait(until: Date(timeIntervalSinceNow: min(1, Double(deadline - now) / 1e9)))
        }
    }

    /// Opens a connection (outside the lock: it blocks on the network), recording the outcome.
    private func connect() throws(StoreError) -> PostgresConnection {
        do {
            let connection = try PostgresConnection(url: settings.url, statementTimeoutMs: settings.statementTimeoutMs,
                                                    connectTimeoutSeconds: settings.connectTimeoutSeconds)
            condition.lock()
            backoff = nil
            condition.unlock()
            return connection
        } catch {
            condition.lock()
            open -= 1
            let delay = min(Self.maxBackoffNanos, backoff.map { $0.delay * 2 } ?? Self.firstBackoffNanos)
            backoff = (DispatchTime.now().uptimeNanoseconds + delay, delay, error)
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func checkIn(_ connection: PostgresConnection) {
        let healthy = connection.isHealthy
        condition.lock()
        if healthy {
            idle.append(connection)
        } else {
            open -= 1
        }
        condition.signal()
        condition.unlock()
    }
}
