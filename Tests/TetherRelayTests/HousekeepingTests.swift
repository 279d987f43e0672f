import TetherNet
import TetherRelay
import TetherStore
import TetherWire
import Dispatch
import XCTest

/// The store-wide sweep (§6.4) on an in-process relay, without sockets.
final class HousekeepingTests: XCTestCase {
    private let day: UInt64 = 86_400_000

    func testASweepReapsOnlyEstablishedRoomsIdlePastTheTTLAndPrunesExpiredRecords() throws {
        let group = try EventLoopGroup(count: 2)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.establishedIdleTTLms = Int64(30 * day)
        let store = InMemoryRoomStore()
        let lines = LogLines()
        let server = RelayServer(configuration: configuration, group: group, store: store) { lines.append($0) }
        let now: UInt64 = 100 * day
        let idle = RoomName(header: String(repeating: "a", count: 64))!
        let fresh = RoomName(header: String(repeating: "b", count: 64))!
        let pairing = RoomName(header: String(repeating: "c", count: 64))!
        try store.setVerifier("V", of: idle, now: now - 30 * day - 1)
        try store.setVerifier("W", of: fresh, now: now - 30 * day)
        try store.putChallenge("old", expiresAt: now - 1, in: pairing)
        try store.putChallenge("live", expiresAt: now + 1, in: pairing)
        try store.setPairingCycles(2, of: pairing)

        let swept = expectation(description: "sweep done")
        server.housekeep(now: now) { swept.fulfill() }
        wait(for: [swept], timeout: 10)

        XCTAssertNil(store.room(idle), "idle past the TTL: torn down, nothing survives")
        XCTAssertEqual(try store.verifier(of: fresh), "W", "exactly at the TTL is not yet idle")
        XCTAssertEqual(store.room(pairing)?.challenges, ["live": now + 1])
        XCTAssertEqual(try store.pairingCycles(of: pairing), 2)
        XCTAssertEqual(lines.all, ["relay \(idle.logTag) teardown reason=room expired"])
    }

    func testARoomRefreshedBeforeItsLaneRunsTheReapIsKept() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.establishedIdleTTLms = 1_000
        let store = InMemoryRoomStore()
        let server = RelayServer(configuration: configuration, group: group, store: store, storeLanes: 1) { _ in }
        let room = RoomName(header: String(repeating: "d", count: 64))!
        try store.setVerifier("V", of: room, now: 1)
        // Hold the lane so the sweep's re-check queues behind a refresh (a signed join's write,
        // already on the room's lane when the sweep finds the room idle).
        let release = DispatchSemaphore(value: 0)
        server.storage.submit(lane: 0) { _ in release.wait() }
        let swept = expectation(description: "sweep done")
        server.housekeep(now: 5_000) { swept.fulfill() }
        server.storage.submit(RoomKey(room)) { try? $0.touch(RoomKey(room), at: 4_999) }
        release.signal()
        wait(for: [swept], timeout: 10)
        XCTAssertEqual(try store.verifier(of: room), "V")
    }
}

private final class LogLines: @unchecked Sendable {
    private let lock = NetLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
