import Foundation
import Glibc
import TetherTestSupport
import XCTest

/// Issue 28: `make test` in a clone the `postgres` user cannot enter (root's 0700 home, a
/// `mktemp -d` directory). The server's tools ran in the test's working directory and failed there
/// ("could not change directory … Permission denied"), and that text, merged from standard error,
/// was read as the answer to a query.
final class PostgresServerTests: XCTestCase {
    func testTheServerWorksFromADirectoryItsUserCannotEnterAndAnswersAreStandardOutputOnly() throws {
        guard PostgresServer.isInstalled else { throw XCTSkip("no PostgreSQL server (scripts/install-deps)") }
        let closed = FileManager.default.temporaryDirectory.appendingPathComponent("tether-closed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: closed, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let previous = FileManager.default.currentDirectoryPath
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(closed.path))
        defer {
            FileManager.default.changeCurrentDirectoryPath(previous)
            try? FileManager.default.removeItem(at: closed)
        }
        let server = try PostgresServer()
        defer { server.shutdown() }
        let database = try server.createDatabase()
        let name = String(database.split(separator: "/").last ?? "")
        XCTAssertEqual(try server.query("SELECT 13", database: name), "13")
        try server.stop()
        try server.start()
        XCTAssertEqual(try server.query("SELECT 15", database: name), "15")
        XCTAssertThrowsError(try server.query("SELECT nonsense", database: name)) {
            XCTAssertTrue("\($0)".contains("nonsense"), "a failure shows what the tool said on standard error: \($0)")
        }
    }
}
