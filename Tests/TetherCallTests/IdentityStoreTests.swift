import Foundation
import TetherCall
import TetherCrypto
import TetherSync
import TetherTestSupport
import TetherWire
import XCTest
import TetherDevice

/// The stored identity of signaling.md §3.3: made once, the same ever after, a damaged file
/// reported and left alone, and panic erasure giving a new ID.
final class IdentityStoreTests: XCTestCase {
    private var root: URL!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("tether-identity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: root)
    }

    private func store() throws -> IdentityStore {
        IdentityStore(directory: try StateDirectory(root.appendingPathComponent("call")))
    }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testTheFirstUseMakesAnIdentityAndEveryLaterUseFindsTheSameOne() throws {
        let store = try store()
        XCTAssertNil(try store.load())
        let (first, created) = try store.loadOrCreate()
        XCTAssertTrue(created)
        let (again, createdAgain) = try store.loadOrCreate()
        XCTAssertFalse(createdAgain)
        XCTAssertEqual(again.id, first.id)
        XCTAssertEqual(again.agreementPublicKey, first.agreementPublicKey)
        // A second store over the same directory (another process, a restart) reads the same.
        XCTAssertEqual(try self.store().load()?.id, first.id)
    }

    /// The file is the 64 bytes of §3.3, owner-only, in an owner-only directory.
    func testTheFileIsSeedThenAgreementKeyOwnerOnly() throws {
        let store = try store()
        let (identity, _) = try store.loadOrCreate()
        XCTAssertEqual(store.path, root.appendingPathComponent("call/call-identity").path)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: store.path))
        XCTAssertEqual(bytes.count, 64)
        XCTAssertEqual(try CallIdentity(stored: Array(bytes)).id, identity.id)
        XCTAssertEqual(try Ed25519.PrivateKey(seed: Array(bytes.prefix(32))).publicKey.rawRepresentation, identity.id.key)
        XCTAssertEqual(try mode(store.path), 0o600)
        XCTAssertEqual(try mode(root.appendingPathComponent("call").path), 0o700)
        // Nothing but the identity is left in the directory (no temporary file).
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("call").path), ["call-identity"])
    }

    func testADamagedFileIsReportedAndLeftUntouched() throws {
        let store = try store()
        for damaged in [[UInt8](), [UInt8](repeating: 7, count: 63), [UInt8](repeating: 7, count: 65), [UInt8](repeating: 7, count: 128)] {
            try Data(damaged).write(to: URL(fileURLWithPath: store.path))
            let expected = IdentityStoreError.damaged(path: store.path, byteCount: damaged.count)
            XCTAssertEqual(thrownError { () throws(IdentityStoreError) in _ = try store.load() }, expected)
            XCTAssertEqual(thrownError { () throws(IdentityStoreError) in _ = try store.loadOrCreate() }, expected)
            XCTAssertEqual(FileManager.default.contents(atPath: store.path).map(Array.init), damaged)
        }
        XCTAssertEqual(IdentityStoreError.damaged(path: "/s/call-identity", byteCount: 3).description,
                       "the identity file /s/call-identity is damaged (3 bytes where 64 are expected); it was left untouched")
    }

    /// A file that exists but cannot be read is not an absent one: making a new identity over it
    /// would change the ID without a word.
    func testAnUnreadableFileIsReportedNotReplaced() throws {
        let store = try store()
        try FileManager.default.createDirectory(atPath: store.path, withIntermediateDirectories: false)
        XCTAssertEqual(thrownError { () throws(IdentityStoreError) in _ = try store.loadOrCreate() }, .unreadable(path: store.path))
        var isDirectory: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: store.path, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    func testEraseMakesTheNextUseANewIdentityWithANewID() throws {
        let store = try store()
        let (old, _) = try store.loadOrCreate()
        try store.erase()
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path))
        XCTAssertNil(try store.load())
        let (new, created) = try store.loadOrCreate()
        XCTAssertTrue(created)
        XCTAssertNotEqual(new.id, old.id)
        XCTAssertNotEqual(new.agreementPublicKey, old.agreementPublicKey)
        // Erasing twice, or with nothing stored, is fine.
        try store.erase()
        try store.erase()
    }

    /// Temporary files of an interrupted write hold keys too.
    func testEraseAlsoRemovesLeftOverTemporaryFiles() throws {
        let store = try store()
        _ = try store.loadOrCreate()
        let leftover = root.appendingPathComponent("call/.call-identity.tmp-12345")
        try Data(repeating: 9, count: 64).write(to: leftover)
        try Data("keep".utf8).write(to: root.appendingPathComponent("call/other"))
        try store.erase()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("call").path), ["other"])
    }

    func testReplaceErasesThenStoresANewIdentityEvenOverADamagedFile() throws {
        let store = try store()
        let (old, _) = try store.loadOrCreate()
        let new = try store.replace()
        XCTAssertNotEqual(new.id, old.id)
        XCTAssertEqual(try store.load()?.id, new.id)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: store.path))
        let fresh = try store.replace()
        XCTAssertEqual(try store.load()?.id, fresh.id)
    }

    /// Two stores making the identity at once agree on one: the first stored wins, the other
    /// reads it instead of replacing it.
    func testConcurrentFirstUsesAgreeOnOneIdentity() throws {
        let directory = root.appendingPathComponent("call")
        let ids = Locked<[SignalingID]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let store = IdentityStore(directory: try! StateDirectory(directory))
            let id = try! store.loadOrCreate().identity.id
            ids.withLock { $0.append(id) }
        }
        let all = ids.withLock { $0 }
        XCTAssertEqual(all.count, 8)
        XCTAssertEqual(Set(all).count, 1)
        XCTAssertEqual(try store().load()?.id, all[0])
    }

    /// §3.1: an ID that is not a curve point is never a usable signing key.
    func testAnIDThatIsNotACurvePointHasNoSigningKey() {
        let notAPoint = SignalingID(canonical: "02" + String(repeating: "0", count: 62))!
        XCTAssertNil(IdentityVerification.signingKey(of: notAPoint))
        XCTAssertNotNil(IdentityVerification.signingKey(of: CallIdentity().id))
    }
}
