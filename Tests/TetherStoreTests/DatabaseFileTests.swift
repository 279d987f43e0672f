import Foundation
import Glibc
import TetherStore
import TetherWire
import XCTest

/// Database files hold secrets: created owner-only whatever the umask (issue "Ready to deploy" 16).
final class DatabaseFileTests: XCTestCase {
    func testNewRelayAndPushDatabasesAndTheirWALAreOwnerOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-mode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let previous = umask(0o022)
        defer { umask(previous) }
        let relayPath = directory.appendingPathComponent("relay.db").path
        let pushPath = directory.appendingPathComponent("push.db").path
        let relay = try SQLiteRoomStore(path: relayPath)
        try relay.setPairingCycles(1, of: RoomKeyFixture.key)
        let push = try SQLitePushStore(path: pushPath)
        try push.putITerm(ITermRegistration(secretHash: String(repeating: "a", count: 64), sandbox: false, registeredAt: 1),
                          token: String(repeating: "b", count: 64), expiresAt: 10)
        for path in [relayPath, relayPath + "-wal", pushPath, pushPath + "-wal"] where FileManager.default.fileExists(atPath: path) {
            let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber).intValue
            XCTAssertEqual(mode & 0o777, 0o600, path)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: relayPath + "-wal"), "the WAL was checked too")
        _ = push
    }
}

enum RoomKeyFixture {
    static let key = RoomKey(RoomName(header: String(repeating: "d", count: 64))!)
}
