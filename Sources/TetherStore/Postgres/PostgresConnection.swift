import CPostgres
import Dispatch
import Glibc

/// One libpq connection, used by one thread at a time (the pool hands it out). Every statement
/// runs as a named prepared statement in text format: the SQL is parsed once per connection, and
/// values travel as parameters, never spliced into the text. Errors become `StoreError`s that
/// carry PostgreSQL's SQLSTATE and primary message only — never a parameter, so never a room key,
/// token or secret (the server's DETAIL line, which can quote values, is dropped).
///
/// Every wait on the server has a deadline of the node's own (`deadline`, set by the pool for each
/// call): libpq is driven asynchronously and the socket polled until then. A server-side
/// `statement_timeout` is enforced by the very server that may be the thing that hung (a stopped
/// process, a stuck disk), and TCP keepalives are answered by its kernel, so neither bounds a call
/// against a hung database; this does. A call that misses its deadline abandons the connection
/// (its state is unknown) and asks the server to cancel the statement from another thread.
final class PostgresConnection {
    private let connection: OpaquePointer
    private var prepared: Set<String> = []
    /// Monotonic ns after which a wait fails; the pool sets it before each call.
    var deadline: UInt64 = .max
    /// Set when a wait missed the deadline: the connection is abandoned, never reused.
    private(set) var timedOut = false

    /// Kernel-level bound on data the server leaves unacknowledged (a silent network): libpq's
    /// `tcp_user_timeout`, ms. The node's own deadline is what bounds a call; this lets the kernel
    /// drop a connection that is dead rather than hung.
    static let tcpUserTimeoutMs = 10_000

    /// Connects with the URL's own settings plus Tether's: the statement timeout (a stuck query
    /// fails server-side too and frees the server's resources), TCP keepalives and a user timeout
    /// (a dead server behind a silent network is noticed), and an application name for
    /// `pg_stat_activity`. The connection handshake is bounded by `deadline` like any call.
    init(url: String, statementTimeoutMs: Int, deadline: UInt64) throws(StoreError) {
        // A URL libpq cannot parse is a refusal no wait will cure; checked apart so that every
        // other failure to connect can be read as the server's absence or its answer.
        var parseError: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &parseError) else {
            let message = parseError.map { Self.firstLine($0) } ?? "out of memory"
            PQfreemem(parseError)
            throw StoreError("database: cannot connect: invalid URL: \(message)")
        }
        PQconninfoFree(options)
        let keys = ["dbname", "application_name", "options", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"]
        let values = [url, "tether", "-c statement_timeout=\(statementTimeoutMs)", "1", "10", "5", "3", String(Self.tcpUserTimeoutMs)]
        let handle = withCStrings(keys) { keyPointers in
            withCStrings(values) { valuePointers in
                // expand_dbname = 1: `dbname` is the whole URL; the later keys add to it.
                PQconnectStartParams(keyPointers, valuePointers, 1)
            }
        }
        guard let handle else { throw StoreError("database: out of memory") }
        connection = handle
        self.deadline = deadline
        // A failed handshake throws from here; `deinit` then closes the handle.
        try handshake()
        // libpq prints the server's notices and warnings raw on stderr, outside the log's line
        // format and its zero-PII rule (a node heard `relation "tether_schema" already exists,
        // skipping` while another migrated, and `terminating connection due to immediate shutdown
        // command` when the server stopped). None of them needs an operator: what fails is
        // reported by the store's own errors.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        // Non-blocking sends: a query the socket cannot take yet is flushed under the deadline.
        PQsetnonblocking(handle, 1)
    }

    deinit { PQfinish(connection) }

    /// False once the server has gone (a restart, a network failure) or a call timed out: the
    /// pool replaces it.
    var isHealthy: Bool { !timedOut && PQstatus(connection) == CONNECTION_OK }

    /// Whether an idle connection can still be used: a server that restarted or dropped it has
    /// sent an error (`FATAL: terminating connection…`) and closed the socket, which only a read
    /// notices. Checked when the pool hands an idle connection out, so the first call after a
    /// database restart gets a fresh connection instead of failing on the dead one. Anything the
    /// server sends unasked to an idle connection of ours is such an ending in practice (none of
    /// them LISTENs), so a readable idle socket is reason enough to replace the connection.
    var isUsableWhenIdle: Bool {
        guard isHealthy else { return false }
        var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Runs `sql` (prepared once under `name`) with `parameters` (nil = SQL NULL).
    @discardableResult
    func execute(_ name: String, _ sql: String, _ parameters: [String?] = []) throws(StoreError) -> PostgresRows {
        if !prepared.contains(name) {
            guard PQsendPrepare(connection, name, sql, Int32(parameters.count), nil) == 1 else { throw failure(nil) }
            PQclear(try finalResult(expecting: [PGRES_COMMAND_OK]))
            prepared.insert(name)
        }
        let sent = withOptionalCStrings(parameters) { pointers in
            PQsendQueryPrepared(connection, name, Int32(parameters.count), pointers, nil, nil, 0)
        }
        guard sent == 1 else { throw failure(nil) }
        let result = try finalResult(expecting: [PGRES_TUPLES_OK, PGRES_COMMAND_OK])
        defer { PQclear(result) }
        return rows(of: result)
    }

    /// Runs one or more statements without parameters (schema changes, transaction control).
    func run(_ sql: String) throws(StoreError) {
        guard PQsendQuery(connection, sql) == 1 else { throw failure(nil) }
        PQclear(try finalResult(expecting: [PGRES_COMMAND_OK, PGRES_TUPLES_OK]))
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    func transaction<R>(_ body: () throws(StoreError) -> R) throws(StoreError) -> R {
        try run("BEGIN")
        do {
            let result = try body()
            try run("COMMIT")
            return result
        } catch {
            // On a broken or abandoned connection the server rolls back by itself.
            if isHealthy { try? run("ROLLBACK") }
            throw error
        }
    }

    /// On a connection that LISTENs: waits up to `waitingMs` for notifications and returns their
    /// payloads (none when the wait ran out). Throws once the connection broke.
    func notifications(waitingMs: Int32) throws(StoreError) -> [String] {
        var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, waitingMs)
        if ready < 0, errno != EINTR { throw StoreError("database: cannot wait for the server: \(String(cString: strerror(errno)))") }
        if ready > 0, PQconsumeInput(connection) != 1 { throw failure(nil) }
        var payloads: [String] = []
        while let notification = PQnotifies(connection) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        guard PQstatus(connection) == CONNECTION_OK else { throw failure(nil) }
        return payloads
    }

    // MARK: Waiting under the deadline

    /// Drives the connection handshake (`PQconnectPoll`) until it is made or the deadline passes.
    private func handshake() throws(StoreError) {
        // Bad at once: a loopback connect refused inside `PQconnectStartParams`, or out of memory.
        guard PQstatus(connection) != CONNECTION_BAD else { throw connectFailure(unreachable: nil) }
        // The first poll acts as if the socket were writable (libpq's documented start).
        var state = PGRES_POLLING_WRITING
        while true {
            switch state {
            case PGRES_POLLING_OK: return
            case PGRES_POLLING_FAILED: throw connectFailure(unreachable: nil)
            case PGRES_POLLING_READING: try wait(for: POLLIN, doing: "connect", unreachable: true)
            default: try wait(for: POLLOUT, doing: "connect", unreachable: true)
            }
            state = PQconnectPoll(connection)
        }
    }

    /// Sends what libpq holds, then reads every result of the command just sent; returns the last
    /// one (each command here has one, or several for a multi-statement `run`, all checked).
    private func finalResult(expecting accepted: [ExecStatusType]) throws(StoreError) -> OpaquePointer {
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { break }
            guard flushed == 1 else { throw failure(nil) }
            // libpq's rule for a pending flush: wait for either direction, and read if readable.
            try wait(for: POLLIN | POLLOUT, doing: "statement")
            guard PQconsumeInput(connection) == 1 else { throw failure(nil) }
        }
        var last: OpaquePointer?
        var error: StoreError?
        while true {
            while PQisBusy(connection) == 1 {
                try wait(for: POLLIN, doing: "statement")
                guard PQconsumeInput(connection) == 1 else {
                    if let last { PQclear(last) }
                    throw failure(nil)
                }
            }
            guard let result = PQgetResult(connection) else { break }
            if error == nil, !accepted.contains(PQresultStatus(result)) { error = failure(result) }
            if let last { PQclear(last) }
            last = result
        }
        if let error {
            if let last { PQclear(last) }
            throw error
        }
        guard let last else { throw failure(nil) }
        return last
    }

    /// Waits until the socket is ready for `events`, or fails when the deadline passes: the
    /// connection is then abandoned and the server asked to cancel what it runs.
    private func wait(for events: Int32, doing what: String, unreachable: Bool = false) throws(StoreError) {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else {
                timedOut = true
                PostgresCanceller.shared.cancel(connection)
                throw StoreError("database: no answer to a \(what) in time (the node's deadline passed; the database may be hung)", unreachable: unreachable)
            }
            var descriptor = pollfd(fd: PQsocket(connection), events: Int16(events), revents: 0)
            let remainingMs = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let ready = poll(&descriptor, 1, remainingMs)
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw StoreError("database: cannot wait for the server: \(String(cString: strerror(errno)))") }
        }
    }

    // MARK: Answers

    private func rows(of result: OpaquePointer) -> PostgresRows {
        let rowCount = Int(PQntuples(result)), columnCount = Int(PQnfields(result))
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            rows.append((0..<columnCount).map { column in
                PQgetisnull(result, Int32(row), Int32(column)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            })
        }
        let affected = String(cString: PQcmdTuples(result))
        return PostgresRows(rows: rows, affected: Int(affected) ?? 0)
    }

    /// SQLSTATE and the primary message of a failed result (or the connection's error).
    private func failure(_ result: OpaquePointer?) -> StoreError {
        if let result, let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))),
           let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))) {
            return StoreError("database: \(String(cString: primary)) (SQLSTATE \(String(cString: state)))")
        }
        return StoreError("database: \(Self.firstLine(PQerrorMessage(connection)))")
    }

    /// A failed connect. `unreachable` nil: decided by the server's answer — a refusal of *us*
    /// comes as a FATAL error (authentication, no such database, no pg_hba entry) and waiting
    /// will not cure it, unless the server says it is starting up, shutting down or full; any
    /// other failure (refused, reset, no route, a name that does not resolve now) is the network's
    /// or the server's absence.
    private func connectFailure(unreachable: Bool?) -> StoreError {
        let message = Self.firstLine(PQerrorMessage(connection))
        let transient = unreachable ?? (!message.contains("FATAL") || ["the database system is", "too many clients", "remaining connection slots"].contains { message.contains($0) })
        return StoreError("database: cannot connect: \(message)", unreachable: transient)
    }

    private static func firstLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "unknown error" }
        let text = String(cString: message)
        return text.split(separator: "\n").first.map(String.init) ?? "unknown error"
    }
}

/// A statement's answer: every row's columns as text (nil = NULL), and the rows it changed.
struct PostgresRows {
    let rows: [[String?]]
    let affected: Int

    var first: [String?]? { rows.first }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) } + [nil]
    defer { for copy in copies { free(copy) } }
    return copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress!) }
}

private func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let copies = strings.map { $0.map { strdup($0) } ?? nil }
    defer { for copy in copies { free(copy) } }
    return copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { body($0.baseAddress) }
}
