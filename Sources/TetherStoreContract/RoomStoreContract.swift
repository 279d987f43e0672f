import Dispatch
import Foundation
public import TetherStore
import TetherWire
import XCTest

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
    ]

    static func verifierCyclesActivityAndQuota(_ store: any RoomStore) throws {
        XCTAssertNil(store.verifier(of: room))
        XCTAssertEqual(store.pairingCycles(of: room), 0)
        store.setPairingCycles(3, of: room)
        XCTAssertEqual(store.pairingCycles(of: room), 3)
        store.setVerifier("V", of: room, now: 10)
        XCTAssertEqual(store.verifier(of: room), "V")
        XCTAssertNil(store.verifier(of: other))
        XCTAssertNil(store.quota(of: room))
        store.setQuota(QuotaRecord(dayStart: 5, bytes: 6), of: room)
        XCTAssertEqual(store.quota(of: room), QuotaRecord(dayStart: 5, bytes: 6))
        store.touch(room, at: 20)
        store.deleteRoom(room)
        XCTAssertNil(store.verifier(of: room))
        XCTAssertEqual(store.pairingCycles(of: room), 0)
        XCTAssertNil(store.quota(of: room))
    }

    static func housekeepingPrunesExpiredRecordsEverywhereAndFindsIdleEstablishedRooms(_ store: any RoomStore) throws {
        store.putChallenge("c", expiresAt: 100, in: room)
        store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: other)
        store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 300), in: other)
        store.pruneExpired(now: 200)
        XCTAssertEqual(store.liveChallenges(in: room, now: 0), 0, "pruned even when read with an earlier clock")
        XCTAssertNil(store.consumeTicket("t", in: other, now: 0))
        XCTAssertNotNil(store.registrationToken("K", in: other, now: 0), "live records stay")

        XCTAssertEqual(store.idleRooms(lastActivityBefore: .max, limit: 10), [], "pairing rooms are never reaped")
        store.setVerifier("V", of: room, now: 1_000)
        store.setVerifier("W", of: other, now: 5_000)
        XCTAssertEqual(store.lastActivity(of: room), 1_000)
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 1_000, limit: 10), [])
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 1_001, limit: 10), [RoomKey(room)])
        XCTAssertEqual(Set(store.idleRooms(lastActivityBefore: 6_000, limit: 10)), [RoomKey(room), RoomKey(other)])
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 6_000, limit: 1).count, 1)
        store.touch(room, at: 7_000)
        XCTAssertEqual(store.idleRooms(lastActivityBefore: 6_000, limit: 10), [RoomKey(other)])
        store.deleteRoom(other)
        XCTAssertNil(store.lastActivity(of: other))
    }

    static func recordsHoldingNothingGoAndEndedQuotaWindowsArePruned(_ store: any RoomStore) throws {
        store.setPairingCycles(0, of: room)
        XCTAssertEqual(storedRooms(store), 0, "resetting a room never parked in writes nothing")
        store.setPairingCycles(2, of: room)
        XCTAssertEqual(storedRooms(store), 1)
        store.setPairingCycles(0, of: room)
        XCTAssertEqual(storedRooms(store), 0, "a record holding only a count goes with it")

        let day = QuotaRecord.window
        store.setQuota(QuotaRecord(dayStart: 10 * day, bytes: 5), of: room)
        store.setPairingCycles(1, of: other)
        store.setVerifier("V", of: other, now: 10 * day)
        XCTAssertEqual(store.pairingCycles(of: other), 0, "establishing drops the count")
        store.pruneExpired(now: 11 * day - 1)
        XCTAssertEqual(store.quota(of: room), QuotaRecord(dayStart: 10 * day, bytes: 5), "the window is still open")
        store.pruneExpired(now: 11 * day)
        XCTAssertNil(store.quota(of: room))
        XCTAssertEqual(storedRooms(store), 1, "only the established room remains")
        XCTAssertEqual(store.verifier(of: other), "V")
    }

    static func storedRooms(_ store: any RoomStore) -> Int { store.roomCount }

    static func theShardMapIsPublishedOnlyWithAHigherVersion(_ store: any RoomStore) throws {
        XCTAssertNil(store.shardMap())
        let first = try ShardMap.single(host: "a.example", version: 1)
        XCTAssertTrue(store.publishShardMap(first))
        XCTAssertEqual(store.shardMap(), first)
        XCTAssertFalse(store.publishShardMap(try ShardMap.single(host: "b.example", version: 1)), "versions only grow")
        XCTAssertFalse(store.publishShardMap(try ShardMap.single(host: "b.example", version: 0)))
        XCTAssertEqual(store.shardMap(), first)
        let second = try ShardMap(version: 2, ranges: [.init(low: 0, high: 9, host: "a.example"), .init(low: 10, high: 65535, host: "b.example")])
        XCTAssertTrue(store.publishShardMap(second))
        XCTAssertEqual(store.shardMap(), second)
    }

    static func ephemeralRecordsAreSingleUseAndExpire(_ store: any RoomStore) throws {
        store.putChallenge("c1", expiresAt: 100, in: room)
        store.putChallenge("c2", expiresAt: 50, in: room)
        XCTAssertEqual(store.liveChallenges(in: room, now: 60), 1, "expired ones are pruned")
        XCTAssertFalse(store.consumeChallenge("c1", in: other, now: 60), "per room")
        XCTAssertTrue(store.consumeChallenge("c1", in: room, now: 100))
        XCTAssertFalse(store.consumeChallenge("c1", in: room, now: 60), "single use")
        store.putChallenge("c3", expiresAt: 100, in: room)
        XCTAssertFalse(store.consumeChallenge("c3", in: room, now: 101), "expired")
        XCTAssertFalse(store.consumeChallenge("c3", in: room, now: 50), "and gone")

        store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        XCTAssertEqual(store.consumeTicket("t", in: room, now: 100), TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"))
        XCTAssertNil(store.consumeTicket("t", in: room, now: 0))

        store.putRegistrationToken("K", RegistrationTokenRecord(expiresAt: 100, attestKeyID: "k", attestPublicKey: nil), in: room)
        XCTAssertEqual(store.registrationToken("K", in: room, now: 100)?.attestKeyID, "k")
        XCTAssertNil(store.registrationToken("K", in: room, now: 101))
        XCTAssertNotNil(store.registrationToken("K", in: room, now: 99), "reading does not consume")
        store.deleteRegistrationToken("K", in: room)
        XCTAssertNil(store.registrationToken("K", in: room, now: 0))

        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(room)))
        store.setAssertionCounter(7, for: "k", in: RoomKey(room))
        XCTAssertEqual(store.assertionCounter(for: "k", in: RoomKey(room)), 7)
        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(other)), "per room")
        store.deleteRoom(room)
        XCTAssertNil(store.assertionCounter(for: "k", in: RoomKey(room)), "gone with the room")
    }

    static func theFirstVerifierIsWrittenAtMostOnce(_ store: any RoomStore) throws {
        XCTAssertTrue(store.setVerifier("V", of: room, now: 10))
        XCTAssertFalse(store.setVerifier("W", of: room, now: 20), "never overwritten")
        XCTAssertEqual(store.verifier(of: room), "V")
        XCTAssertEqual(store.lastActivity(of: room), 10)
    }

    static func aTouchRefreshesOnlyAnEstablishedRoom(_ store: any RoomStore) throws {
        store.touch(room, at: 5)
        XCTAssertEqual(storedRooms(store), 0, "a join that raced a delete brings nothing back")
        store.setVerifier("V", of: room, now: 1)
        store.touch(room, at: 5)
        XCTAssertEqual(store.lastActivity(of: room), 5)
    }

    static func anAdmissionReadConsumesATicketOnlyInAPairingRoom(_ store: any RoomStore) throws {
        let ticket = TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p")
        store.putTicket("t", ticket, in: room)
        store.setPairingCycles(3, of: room)
        store.setQuota(QuotaRecord(dayStart: 1, bytes: 2), of: room)
        let read = store.admission(AdmissionQuery(ticket: "t", now: 50), of: RoomKey(room))
        XCTAssertEqual(read, AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 3), quota: QuotaRecord(dayStart: 1, bytes: 2), ticket: ticket))
        XCTAssertNil(store.admission(AdmissionQuery(ticket: "t", now: 50), of: RoomKey(room)).ticket, "single use")

        store.putTicket("u", ticket, in: other)
        store.setVerifier("V", of: other, now: 1)
        XCTAssertNil(store.admission(AdmissionQuery(ticket: "u", now: 50), of: RoomKey(other)).ticket, "irrelevant once established")
        XCTAssertEqual(store.consumeTicket("u", in: other, now: 50), ticket, "and left alone")
    }

    /// relay.md §6.9's outcomes from the store alone, with racing threads (as several nodes would
    /// race on a shared database): a ticket, a challenge and a shard-map version each have exactly
    /// one winner, and only one of many first verifiers is written.
    static func concurrentConsumersOfOneSecretHaveExactlyOneWinner(_ store: any RoomStore) throws {
        let racers = 16
        store.putTicket("t", TicketRecord(expiresAt: 100, keyID: "k", publicKey: "p"), in: room)
        store.putChallenge("c", expiresAt: 100, in: room)
        let map = try ShardMap.single(host: "a.example", version: 7)
        let wins = Wins()
        DispatchQueue.concurrentPerform(iterations: racers) { racer in
            if store.consumeTicket("t", in: room, now: 50) != nil { wins.add("ticket") }
            if store.consumeChallenge("c", in: room, now: 50) { wins.add("challenge") }
            if store.setVerifier("V\(racer)", of: other, now: 1) { wins.add("verifier") }
            if store.publishShardMap(map) { wins.add("map") }
        }
        XCTAssertEqual(wins.counts, ["ticket": 1, "challenge": 1, "verifier": 1, "map": 1])
        XCTAssertNotNil(store.verifier(of: other))
    }
}

private final class Wins: @unchecked Sendable {   // every access under `lock`
    private let lock = NSLock()
    private var tally: [String: Int] = [:]
    func add(_ kind: String) { lock.withLock { tally[kind, default: 0] += 1 } }
    var counts: [String: Int] { lock.withLock { tally } }
}
