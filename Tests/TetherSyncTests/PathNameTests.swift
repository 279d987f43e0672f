import TetherSync
import XCTest

final class PathNameTests: XCTestCase {
    /// Issue 28: a one-character bare name trapped in Foundation's `deletingLastPathComponent`.
    func testTheParentOfAPathIsReadAsTheShellReadsIt() {
        let cases: [(String, String)] = [
            ("A", "."), ("AB", "."), ("A/", "."), ("A//", "."), (".", "."), ("..", "."), ("", "."), ("é", "."),
            ("./A", "."), ("a/b", "a"), ("a//b", "a"), ("a/b/", "a"), ("/a", "/"), ("/", "/"), ("//", "/"), ("/a/b/c", "/a/b"),
        ]
        for (path, parent) in cases { XCTAssertEqual(PathName.parent(of: path), parent, path) }
    }

    func testTheKindOfAPathFollowsWhatIsThere() {
        XCTAssertEqual(PathName.kind("/"), .directory)
        XCTAssertEqual(PathName.kind("/dev/null"), .other)
        XCTAssertNil(PathName.kind("/nonexistent-\(UInt64.random(in: 0 ... .max))"))
        XCTAssertTrue(PathName.isDirectory("."))
    }
}
