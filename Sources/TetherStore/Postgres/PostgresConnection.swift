import CPostgres
import Glibc

/// One libpq connection, used by one thread at a time (the pool hands it out). Every statement
/// runs as a named prepared statement in text format: the SQL is parsed once per connection, and
/// values travel as parameters, never spliced into the text. Errors become `StoreError`s that
/// carry PostgreSQL's SQLSTATE and primary message only — never a parameter, so never a room key,
/// token or secret (the server's DETAIL line, which can quote values, is dropped).
final class PostgresConnection {
    private let connection: OpaquePointer
    private var prepared: Set<String> = []

    /// Connects with the URL's own settings plus Tether's: the statement timeout (a stuck query
    /// fails instead of holding a store lane), a connect timeout, TCP keepalives (a dead server
    /// behind a silent network is noticed), and an application name for `pg_stat_activity`.
    init(url: String, statementTimeoutMs: Int, connectTimeoutSeconds: Int) throws(StoreError) {
        let keys = ["dbname", "connect_timeout", "application_name", "options", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"]
        let values = [url, String(connectTimeoutSeconds), "tether", "-c statement_timeout=\(statementTimeoutMs)", "1", "10", "5", "3"]
        let handle = withCStrings(keys) { keyPointers in
            withCStrings(values) { valuePointers in
                // expand_dbname = 1: `dbname` is the whole URL; the later keys add to it.
                PQconnectdbParams(keyPointers, valuePointers, 1)
            }
        }
        guard let handle else { throw StoreError("database: out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.firstLine(PQerrorMessage(handle))
            PQfinish(handle)
            throw StoreError("database: cannot connect: \(message)")
        }
        // libpq prints the server's notices and warnings raw on stderr, outside the log's line
        // format and its zero-PII rule (a node heard `relation "tether_schema" already exists,
        // skipping` while another migrated, and `terminating connection due to immediate shutdown
        // command` when the server stopped). None of them needs an operator: what fails is
        // reported by the store's own errors.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        connection = handle
    }

    deinit { PQfinish(connection) }

    /// False once the server has gone (a restart, a network failure): the pool replaces it.
    var isHealthy: Bool { PQstatus(connection) == CONNECTION_OK }

    /// Runs `sql` (prepared once under `name`) with `parameters` (nil = SQL NULL).
    @discardableResult
    func execute(_ name: String, _ sql: String, _ parameters: [String?] = []) throws(StoreError) -> PostgresRows {
        if !prepared.contains(name) {
            let result = PQprepare(connection, name, sql, Int32(parameters.count), nil)
            try check(result, PGRES_COMMAND_OK)
            PQclear(result)
            prepared.insert(name)
        }
        let result = withOptionalCStrings(parameters) { pointers in
            PQexecPrepared(connection, name, Int32(parameters.count), pointers, nil, nil, 0)
        }
        return try rows(of: result)
    }

    /// Runs one or more statements without parameters (schema changes, transaction control).
    func run(_ sql: String) throws(StoreError) {
        let result = PQexec(connection, sql)
        guard let result else { throw failure(nil) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw failure(result) }
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    func transaction<R>(_ body: () throws(StoreError) -> R) throws(StoreError) -> R {
        try run("BEGIN")
        do {
            let result = try body()
            try run("COMMIT")
            return result
        } catch {
            // On a broken connection the server has already rolled back.
            try? run("ROLLBACK")
            throw error
        }
    }

    private func rows(of result: OpaquePointer?) throws(StoreError) -> PostgresRows {
        guard let result else { throw failure(nil) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else { throw failure(result) }
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

    private func check(_ result: OpaquePointer?, _ expected: ExecStatusType) throws(StoreError) {
        guard let result else { throw failure(nil) }
        guard PQresultStatus(result) == expected else {
            let error = failure(result)
            PQclear(result)
            throw error
        }
    }

    /// SQLSTATE and the primary message of a failed result (or the connection's error).
    private func failure(_ result: OpaquePointer?) -> StoreError {
        if let result, let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))),
           let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))) {
            return StoreError("database: \(String(cString: primary)) (SQLSTATE \(String(cString: state)))")
        }
        return StoreError("database: \(Self.firstLine(PQerrorMessage(connection)))")
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
