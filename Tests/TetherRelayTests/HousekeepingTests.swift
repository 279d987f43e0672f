import TetherCrypto
import TetherNet
@testable import TetherRelay
import TetherStore
import TetherWire
import Dispatch
import XCTest
import TetherEncoding

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
        server.housekeep(now: .milliseconds(now)) { swept.fulfill() }
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
        server.housekeep(now: .milliseconds(5_000)) { swept.fulfill() }
        server.storage.submit(RoomKey(room)) { try? $0.touch(RoomKey(room), at: 4_999) }
        release.signal()
        wait(for: [swept], timeout: 10)
        XCTAssertEqual(try store.verifier(of: room), "V")
    }
}

extension HousekeepingTests {
    /// §6.5: a reaped room is simply a fresh pairing room. Before the sweep a Proof without a
    /// signature is refused `signature required` (established, every mode); after it, in open
    /// mode a signed join parks (the signature is not read), in attestation mode a phone needs a
    /// ticket, and `/delete` answers `not established`.
    func testAReapedRoomIsAFreshPairingRoom() throws {
        let group = try EventLoopGroup(count: 1)
        var relays: [RelayServer] = []
        // The relays outlive their loop: released only after it stopped with their sockets.
        defer {
            group.shutdown()
            withExtendedLifetime(relays) {}
        }
        let room = RoomName(header: String(repeating: "e", count: 64))!
        let secret = RoomSecret.generate()
        let now: UInt64 = 100 * day
        for attested in [false, true] {
            var configuration = RelayConfiguration()
            configuration.attestationRequired = attested
            configuration.appID = "TEAMID.com.example.companion"
            configuration.origin = "http://relay.test"
            configuration.establishedIdleTTLms = Int64(30 * day)
            let store = InMemoryRoomStore()
            let relay = RelayServer(configuration: configuration, group: group, store: store) { _ in }
            relays.append(relay)
            try store.setVerifier(Base64.encode(secret.verifier), of: room, now: now - 30 * day - 1)
            func join(_ role: RelayRole, _ proof: String) throws -> [String?] {
                let peer = InMemoryPeer()
                try RoomOverInMemoryTransportTests.attach(peer, to: room, relay)
                let answer = RoomOverInMemoryTransportTests.admit(peer, role, relay, proof: proof)
                return answer == #"{"ok":true}"# ? [answer] : [answer, peer.next()]
            }
            let mode = attested ? "attestation mode" : "open mode"
            XCTAssertEqual(try join(.phone, "{}"), [#"{"ok":false,"error":"signature required"}"#, "close:1008:signature required"],
                           "\(mode): established before the sweep")

            let swept = expectation(description: "sweep done")
            relay.housekeep(now: .milliseconds(now)) { swept.fulfill() }
            wait(for: [swept], timeout: 10)
            XCTAssertNil(store.room(room), "\(mode): reaped")

            if attested {
                XCTAssertEqual(try join(.phone, "{}"), [#"{"ok":false,"error":"ticket required"}"#, "close:1008:ticket required"])
                XCTAssertEqual(try join(.phone, #"{"sig":"\#(Base64.encode([UInt8](repeating: 1, count: 64)))"}"#),
                               [#"{"ok":false,"error":"ticket required"}"#, "close:1008:ticket required"], "a signature is no ticket")
            } else {
                XCTAssertEqual(try join(.mac, #"{"sig":"\#(Base64.encode([UInt8](repeating: 1, count: 64)))"}"#), [#"{"ok":true}"#],
                               "open mode: any proof parks, the signature is ignored")
            }

            let endpoints = RoomEndpoints(origin: configuration.origin, attestationRequired: attested)
            var n: UInt8 = 0
            func call(_ path: String, _ body: String) -> RoomEndpoints.Outcome {
                endpoints.handle(path: path, body: Array(body.utf8), room: room, store: store, now: .milliseconds(now)) { count in
                    n &+= 1
                    return [UInt8](repeating: n, count: count)
                }
            }
            let issued = call("/attest/challenge", "")
            guard case let .object(fields)? = JSONValue.parse(Array(issued.json.utf8)), case let .string(challenge)? = fields["challenge"] else {
                return XCTFail("\(mode): no challenge: \(issued.json)")
            }
            let delete = DeleteTranscript(challenge: try Base64.decode(challenge), room: room, origin: configuration.origin)
            let signature = Base64.encode(secret.joinSigningKey().signature(for: delete.bytes))
            let outcome = call("/delete", #"{"challenge":"\#(challenge)","signature":"\#(signature)"}"#)
            XCTAssertEqual(outcome.status, 403, mode)
            XCTAssertEqual(outcome.json, #"{"ok":false,"error":"not established"}"#, "\(mode): the old pairing's own signature no longer deletes")
            XCTAssertFalse(outcome.tearDown)
        }
    }
}

private final class LogLines: @unchecked Sendable {
    private let lock = NetLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
