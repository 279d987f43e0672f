import Foundation
import TetherService
import XCTest

/// Issue 28: path settings are checked at start-up as typed (relative to the working directory,
/// a bare name included), so a mistyped one is a line naming the setting and exit 2.
final class PathSettingTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-paths-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("dir"), withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: directory.appendingPathComponent("file").path, contents: Data("x".utf8))
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    private func message<Value>(_ parser: SettingParser<Value>, _ text: String) -> String? {
        do throws(InvalidSettingValue) { _ = try parser.parse(text); return nil } catch { return error.message }
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func testADatabaseLocationIsMemoryAURLOrAFileWhoseDirectoryExists() {
        let parser = SettingParser<String>.databaseLocation
        for accepted in [":memory:", "postgres://u@h/db", "postgresql://h/db", "relay.db", "A", path("new.db"), path("file")] {
            XCTAssertNil(message(parser, accepted), accepted)
        }
        XCTAssertEqual(message(parser, ""), "needs a SQLite file path, a postgres:// URL or :memory:")
        XCTAssertEqual(message(parser, path("dir")), "\(path("dir")) is a directory, not a database file")
        XCTAssertEqual(message(parser, "A/"), "A/ is a directory, not a database file")
        XCTAssertEqual(message(parser, path("none/x.db")), "no directory \(path("none")) for \(path("none/x.db"))")
        XCTAssertEqual(message(parser, path("file/x.db")), "\(path("file")) is not a directory, so \(path("file/x.db")) cannot be made")
    }

    func testAReadableFileExistsIsNotADirectoryAndCanBeRead() {
        let parser = SettingParser<String?>.readableFile
        XCTAssertNil(message(parser, path("file")))
        XCTAssertEqual(message(parser, ""), "needs a file path")
        XCTAssertEqual(message(parser, path("none")), "cannot read \(path("none")): No such file or directory")
        XCTAssertEqual(message(parser, path("dir")), "\(path("dir")) is a directory, not a file")
    }

    func testADirectoryPathIsAnythingButEmptyOrAFile() {
        let parser = SettingParser<String>.directoryPath
        for accepted in ["acme", "A", path("dir"), path("new/deeper")] { XCTAssertNil(message(parser, accepted), accepted) }
        XCTAssertEqual(message(parser, ""), "needs a directory path")
        XCTAssertEqual(message(parser, path("file")), "\(path("file")) is not a directory")
    }
}
