import Foundation
import TetherClient
import XCTest
import TetherDevice

final class StateDirectoryTests: XCTestCase {
    private var url: URL!

    override func setUp() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("tether-state-\(UUID().uuidString)")
    }

    override func tearDown() { try? FileManager.default.removeItem(at: url) }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testFilesAreOwnerOnlyAndReplacedWhole() throws {
        let state = try StateDirectory(url)
        XCTAssertEqual(try mode(url.path), 0o700)
        XCTAssertNil(state.read("pairing"))
        try state.write("pairing", Array("first".utf8))
        try state.write("pairing", Array("second, longer".utf8))
        XCTAssertEqual(state.read("pairing"), Array("second, longer".utf8))
        XCTAssertEqual(try mode(url.appendingPathComponent("pairing").path), 0o600)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: url.path), ["pairing"], "no temporary file left behind")
        state.remove("pairing")
        XCTAssertNil(state.read("pairing"))
    }

    /// Issue 28: the path as typed, relative or absolute, its parents made; what cannot hold
    /// state is refused before anything is created or tightened.
    func testAPathAsTypedIsOpenedWithItsParentsAndWhatCannotHoldStateIsRefused() throws {
        let nested = url.appendingPathComponent("x/y/z").path
        _ = try StateDirectory(path: nested)
        XCTAssertEqual(try mode(nested), 0o700)
        XCTAssertNotEqual(try mode(url.appendingPathComponent("x").path), 0o700, "only the state directory itself is owner-only")
        let file = url.appendingPathComponent("file").path
        FileManager.default.createFile(atPath: file, contents: Data(), attributes: [.posixPermissions: 0o644])
        XCTAssertThrowsError(try StateDirectory(path: file)) { XCTAssertEqual($0 as? StateDirectory.Failure, .io("\(file) is not a directory")) }
        XCTAssertEqual(try mode(file), 0o644, "a file in the way is not tightened")
        XCTAssertThrowsError(try StateDirectory(path: file + "/inner")) { XCTAssertEqual($0 as? StateDirectory.Failure, .io("\(file) is not a directory")) }
        XCTAssertThrowsError(try StateDirectory(path: "")) { XCTAssertEqual($0 as? StateDirectory.Failure, .io("no directory given")) }
        for root in ["/", "//", "/.."] {
            XCTAssertThrowsError(try StateDirectory(path: root)) { XCTAssertEqual($0 as? StateDirectory.Failure, .io("/ cannot be a state directory")) }
        }
    }

    func testAnExistingDirectoryIsTightened() throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        _ = try StateDirectory(url)
        XCTAssertEqual(try mode(url.path), 0o700)
    }

    func testTheStaticKeyIsMadeOnceAndADamagedOneIsNeverReplaced() throws {
        let first = try StateDirectory(url).staticKey()
        let again = try StateDirectory(url).staticKey()
        XCTAssertEqual(first.publicKey, again.publicKey, "stable across runs")
        try StateDirectory(url).write("noise-static-private-key", [1, 2, 3])
        XCTAssertThrowsError(try StateDirectory(url).staticKey()) {
            XCTAssertEqual($0 as? StateDirectory.Failure, .corrupt("noise-static-private-key"))
        }
        XCTAssertEqual(try StateDirectory(url).read("noise-static-private-key"), [1, 2, 3], "left for the user to inspect")
    }

    /// `create` stores only where nothing is: an existing file, whatever it holds, is kept.
    func testCreateNeverReplacesAnExistingFile() throws {
        let state = try StateDirectory(url)
        XCTAssertFalse(state.exists("key"))
        XCTAssertTrue(try state.create("key", [1, 2, 3]))
        XCTAssertTrue(state.exists("key"))
        XCTAssertFalse(try state.create("key", [4, 5, 6]))
        XCTAssertEqual(state.read("key"), [1, 2, 3])
        XCTAssertEqual(try mode(url.appendingPathComponent("key").path), 0o600)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: url.path), ["key"], "no temporary file left behind")
    }

    func testDeleteRemovesAFileAndAnAbsentOneIsAlreadyDeleted() throws {
        let state = try StateDirectory(url)
        try state.write("key", [1])
        try state.delete("key")
        XCTAssertFalse(state.exists("key"))
        try state.delete("key")
        // A directory in the file's place cannot be unlinked: that is an error, not "deleted".
        try FileManager.default.createDirectory(at: url.appendingPathComponent("key"), withIntermediateDirectories: false)
        XCTAssertTrue(state.exists("key"))
        XCTAssertNil(state.read("key"))
        XCTAssertThrowsError(try state.delete("key"))
    }
}
