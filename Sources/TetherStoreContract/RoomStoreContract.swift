import Dispatch
import Foundation
public import TetherStore
import TetherWire
import XCTest
import TetherSync

/// The behaviour every `RoomStore` backend must show, run unchanged by each backend's tests (the
/// in-memory double, SQLite, and the next one): `RoomStoreContract.verify { try makeStore() }`.
/// Each case gets a fresh, empty store. Failures are XCTest assertions of the calling test.
public enum RoomStoreContract {
    static let room = RoomName(header: String(repeating: "d", count: 64))!
    static let other = RoomName(header: String(repeating: "e", count: 64))!

    /// Every case, in order, each on a fresh store from `makeStore`.
    public static func verify(_ makeStore: () throws -> any RoomStore) throws {
        for (_, check) in cases { try check(try makeStore()) }
    }

    public static let cases: [(name: String, check: @Sendable (any RoomStore) throws -> Void)] = [
        ("verifier, cycles, activity and quota", verifierCyclesActivityAndQuota),
        ("housekeeping prunes and finds idle rooms", housekeepingPrunesExpiredRecordsEverywhereAndFindsIdleEstablishedRooms),
        ("records holding nothing go", recordsHoldingNothingGoAndEndedQuotaWindowsArePruned),
        ("shard map versions only grow", theShardMapIsPublishedOnlyWithAHigherVersion),
        ("ephemeral records are single use", ephemeralRecordsAreSingleUseAndExpire),
        ("the first verifier is written once", theFirstVerifierIsWrittenAtMostOnce),
        ("a touch never brings a room back", aTouchRefreshesOnlyAnEstablishedRoom),
        ("an admission read consumes a ticket only in a pairing room", anAdmissionReadConsumesATicketOnlyInAPairingRoom),
        ("concurrent consumers: one winner", concurrentConsumersOfOneSecretHaveExactlyOneWinner),
        ("a write probe leaves nothing behind", aWriteProbeLeavesNothingBehind),
    ]

    static func aWriteProbeLeavesNothingBehind(_ store: any RoomStore) throws {
        try store.setVerifier("V", of: room, now: 10)
        for _ in 0..<3 { try store.probeWrite() }
        XCTAssertEqual(try store.verifier(of: room), "V")
        XCTAssertEqual(try store.roomCount, 1)
    }

    static func verifierCyclesActivityAndQuota(_ store: any RoomStore) throws {
        XCTAssertNil(try store.verifier(of: room))
        XCTAssertEqual(try store.pairingCycles(of: room), 0)
        try store.setPairingCycles(3, of: room)
        XCTAssertEqual(try store.pairingCycles(of: room), 3)
        try store.setVerifier("V", of: room, now: 10)
        XCTAssertEqual(try store.verifier(of: room), "V")
        XCTAssertNil(try store.verifier(of: other))
        XCTAssertNil(try store.quota(of: room))
        try store.setQuota(QuotaRecord(dayStart: 5, bytes: 6), of: room)
        XCTAssertEqual(try store.quota(of: room), QuotaRecord(dayStart: 5, bytes: 6))
        try store.touch(room, at: 20)
        try store.deleteRoom(room)
        XCTAssertNil(try store.verifier(of: room))
        XCTAssertEqual(try store.pairingCycles(of: room), 0)
        XCTAssertNil(try store.quota(of: room))
    }

    static func housekeepingPrunesExpiredRecordsEverywhereAndFindsIdleEstablishedRooms(_ store: any RoomStore) throws {
        try store.putChallenge("c", expiresAt: 100, in: room)
        try store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: other)
        try store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 300), in: other)
        try store.pruneExpired(now: 200)
        XCTAssertEqual(try store.liveChallenges(in: room, now: 0), 0, "pruned even when read with an earlier clock")
        XCTAssertNil(try store.consumeTicket("t", in: other, now: 0))
        XCTAssertNotNil(try store.registrationToken("K", in: other, now: 0), "live records stay")

        XCTAssertEqual(try store.idleRooms(lastActivityBefore: .max, limit: 10), [], "pairing rooms are never reaped")
        try store.setVerifier("V", of: room, now: 1_000)
        try store.setVerifier("W", of: other, now: 5_000)
        XCTAssertEqual(try store.lastActivity(of: room), 1_000)
        XCTAssertEqual(try store.idleRooms(lastActivityBefore: 1_000, limit: 10), [])
        XCTAssertEqual(try store.idleRooms(lastActivityBefore: 1_001, limit: 10), [RoomKey(room)])
        XCTAssertEqual(Set(try store.idleRooms(lastActivityBefore: 6_000, limit: 10)), [RoomKey(room), RoomKey(other)])
        XCTAssertEqual(try store.idleRooms(lastActivityBefore: 6_000, limit: 1).count, 1)
        try store.touch(room, at: 7_000)
        XCTAssertEqual(try store.idleRooms(lastActivityBefore: 6_000, limit: 10), [RoomKey(other)])
        try store.deleteRoom(other)
        XCTAssertNil(try store.lastActivity(of: other))
    }

    static func recordsHoldingNothingGoAndEndedQuotaWindowsArePruned(_ store: any RoomStore) throws {
        try store.setPairingCycles(0, of: room)
        XCTAssertEqual(try storedRooms(store), 0, "resetting a room never parked in writes nothing")
        try store.setPairingCycles(2, of: room)
        XCTAssertEqual(try storedRooms(store), 1)
        try store.setPairingCycles(0, of: room)
        XCTAssertEqual(try storedRooms(store), 0, "a record holding only a count goes with it")

        let day = QuotaRecord.window
        try store.setQuota(QuotaRecord(dayStart: 10 * day, bytes: 5), of: room)
        try store.setPairingCycles(1, of: other)
        try store.setVerifier("V", of: other, now: 10 * day)
        XCTAssertEqual(try store.pairingCycles(of: other), 0, "establishing drops the count")
        try store.pruneExpired(now: 11 * day - 1)
        XCTAssertEqual(try store.quota(of: room), QuotaRecord(dayStart: 10 * day, bytes: 5), "the window is still open")
        try store.pruneExpired(now: 11 * day)
        XCTAssertNil(try store.quota(of: room))
        XCTAssertEqual(try storedRooms(store), 1, "only the established room remains")
        XCTAssertEqual(try store.verifier(of: other), "V")
    }

    static func storedRooms(_ store: any RoomStore) throws -> Int { try store.roomCount }

    static func theShardMapIsPublishedOnlyWithAHigherVersion(_ store: any RoomStore) throws {
        XCTAssertNil(try store.shardMap())
        let first = try ShardMap.single(host: "a.example", version: 1)
        XCTAssertTrue(try store.publishShardMap(first))
        XCTAssertEqual(try store.shardMap(), first)
        XCTAssertFalse(try store.publishShardMap(try ShardMap.single(host: "b.example", version: 1)), "versions only grow")
        XCTAssertFalse(try store.publishShardMap(try ShardMap.single(host: "b.example", version: 0)))
        XCTAssertEqual(try store.shardMap(), first)
        let second = try ShardMap(version: 2, ranges: [.init(low: 0, high: 9, host: "a.example"), .init(low: 10, high: 65535, host: "b.example")])
        XCTAssertTrue(try store.publishShardMap(second))
        XCTAssertEqual(try store.shardMap(), second)
    }

    static func ephemeralRecordsAreSingleUseAndExpire(_ store: any RoomStore) throws {
        try store.putChallenge("c1", expiresAt: 100, in: room)
        try store.putChallenge("c2", expiresAt: 50, in: room)
        XCTAssertEqual(try store.liveChallenges(in: room, now: 60), 1, "expired ones are pruned")
        XCTAssertFalse(try store.consumeChallenge("c1", in: other, now: 60), "per room")
        XCTAssertTrue(try store.consumeChallenge("c1", in: room, now: 100))
        XCTAssertFalse(try store.consumeChallenge("c1", in: room, now: 60), "single use")
        try store.putChallenge("c3", expiresAt: 100, in: room)
        XCTAssertFalse(try store.consumeChallenge("c3", in: room, now: 101), "expired")
        XCTAssertFalse(try store.consumeChallenge("c3", in: room, now: 50), "and gone")

        try store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        XCTAssertEqual(try store.consumeTicket("t", in: room, now: 100), TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"))
        XCTAssertNil(try store.consumeTicket("t", in: room, now: 0))

        try store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 100, attestKeyID: "k", attestPublicKey: nil), in: room)
        XCTAssertEqual(try store.registrationToken("K", in: room, now: 100)?.attestKeyID, "k")
        XCTAssertNil(try store.registrationToken("K", in: room, now: 101))
        XCTAssertNotNil(try store.registrationToken("K", in: room, now: 99), "reading does not consume")
        try store.deleteRegistrationToken("K", in: room)
        XCTAssertNil(try store.registrationToken("K", in: room, now: 0))

        XCTAssertNil(try store.assertionCounter(for: "k", in: RoomKey(room)))
        try store.setAssertionCounter(7, for: "k", in: RoomKey(room))
        XCTAssertEqual(try store.assertionCounter(for: "k", in: RoomKey(room)), 7)
        XCTAssertNil(try store.assertionCounter(for: "k", in: RoomKey(other)), "per room")
        try store.deleteRoom(room)
        XCTAssertNil(try store.assertionCounter(for: "k", in: RoomKey(room)), "gone with the room")
    }

    static func theFirstVerifierIsWrittenAtMostOnce(_ store: any RoomStore) throws {
        XCTAssertTrue(try store.setVerifier("V", of: room, now: 10))
        XCTAssertFalse(try store.setVerifier("W", of: room, now: 20), "never overwritten")
        XCTAssertEqual(try store.verifier(of: room), "V")
        XCTAssertEqual(try store.lastActivity(of: room), 10)
    }

    static func aTouchRefreshesOnlyAnEstablishedRoom(_ store: any RoomStore) throws {
        try store.touch(room, at: 5)
        XCTAssertEqual(try storedRooms(store), 0, "a join that raced a delete brings nothing back")
        try store.setVerifier("V", of: room, now: 1)
        try store.touch(room, at: 5)
        XCTAssertEqual(try store.lastActivity(of: room), 5)
    }

    static func anAdmissionReadConsumesATicketOnlyInAPairingRoom(_ store: any RoomStore) throws {
        let ticket = TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p")
        try store.putTicket("t", ticket, in: room)
        try store.setPairingCycles(3, of: room)
        try store.setQuota(QuotaRecord(dayStart: 1, bytes: 2), of: room)
        let read = try store.admission(AdmissionQuery(ticket: "t", now: 50), of: RoomKey(room))
        XCTAssertEqual(read, AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 3), quota: QuotaRecord(dayStart: 1, bytes: 2), ticket: ticket))
        XCTAssertNil(try store.admission(AdmissionQuery(ticket: "t", now: 50), of: RoomKey(room)).ticket, "single use")

        try store.putTicket("u", ticket, in: other)
        try store.setVerifier("V", of: other, now: 1)
        XCTAssertNil(try store.admission(AdmissionQuery(ticket: "u", now: 50), of: RoomKey(other)).ticket, "irrelevant once established")
        XCTAssertEqual(try store.consumeTicket("u", in: other, now: 50), ticket, "and left alone")
    }

    /// relay.md §6.9's outcomes from the store alone, with racing threads (as several nodes would
    /// race on a shared database): a ticket, a challenge and a shard-map version each have exactly
    /// one winner, and only one of many first verifiers is written.
    static func concurrentConsumersOfOneSecretHaveExactlyOneWinner(_ store: any RoomStore) throws {
        let racers = 16
        try store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        try store.putChallenge("c", expiresAt: 100, in: room)
        let map = try ShardMap.single(host: "a.example", version: 7)
        let wins = Wins()
        DispatchQueue.concurrentPerform(iterations: racers) { racer in
            do {
                if try store.consumeTicket("t", in: room, now: 50) != nil { wins.add("ticket") }
                if try store.consumeChallenge("c", in: room, now: 50) { wins.add("challenge") }
                if try store.setVerifier("V\(racer)", of: other, now: 1) { wins.add("verifier") }
                if try store.publishShardMap(map) { wins.add("map") }
            } catch {
                wins.add("failed: \(error)")
            }
        }
        XCTAssertEqual(wins.counts, ["ticket": 1, "challenge": 1, "verifier": 1, "map": 1])
        XCTAssertNotNil(try store.verifier(of: other))
    }
}

private final class Wins: Sendable {
    private let tally = Locked<[String: Int]>([:])
    func add(_ kind: String) { tally.withLock { $0[kind, default: 0] += 1 } }
    var counts: [String: Int] { tally.withLock { $0 } }
}
