import Dispatch
import Foundation
import Synchronization
public import TetherStore
import TetherSync
import XCTest

/// The behaviour every `PushStore` backend must show, run unchanged by each backend's tests (the
/// in-memory double, SQLite, and the next one): `PushStoreContract.verify { try makeStore() }`.
/// Each case gets a fresh, empty store. Failures are XCTest assertions of the calling test.
public enum PushStoreContract {
    /// Every case, in order, each on a fresh store from `makeStore`.
    public static func verify(_ makeStore: () throws -> any PushStore) throws {
        for (_, check) in cases { try check(try makeStore()) }
    }

    public static let cases: [(name: String, check: @Sendable (any PushStore) throws -> Void)] = [
        ("Profile M registrations are stored, read and replaced", myttyRegistrationsAreStoredReadAndReplaced),
        ("Profile I registrations are stored, read and replaced", itermRegistrationsAreStoredReadAndReplaced),
        ("the two profiles are separate namespaces", theTwoProfilesAreSeparateNamespaces),
        ("a record expires at its expiry time", aRecordReadsAsAbsentFromItsExpiryTimeOn),
        ("a renewal extends only a live record", aRenewalExtendsALiveRecordAndNeverResurrectsOne),
        ("deletes are idempotent", deletesAreIdempotentAndTouchOnlyTheirProfile),
        ("pruning removes exactly the expired records", pruningRemovesExactlyTheExpiredRecordsOfBothProfiles),
        ("the device count counts live records", theDeviceCountCountsOnlyLiveRecordsOfBothProfiles),
        ("values round-trip exactly", valuesRoundTripExactly),
        ("renewals racing deletes never revive a record", renewalsRacingDeletesNeverLeaveADeletedRecordAlive),
        ("a write probe leaves nothing behind", aWriteProbeLeavesNothingBehind),
    ]

    static func aWriteProbeLeavesNothingBehind(_ store: any PushStore) throws {
        try store.putMytty(mytty("01"), pushID: pushID, expiresAt: 1_000)
        for _ in 0..<3 { try store.probeWrite() }
        XCTAssertEqual(try store.mytty(pushID: pushID, now: 500), mytty("01"))
        XCTAssertEqual(try store.deviceCount(now: 0), 1)
    }

    static let pushID = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b"
    static let token = String(repeating: "ab", count: 32)

    static func mytty(_ tag: String, _ environment: PushEnvironment = .production) -> MyttyRegistration {
        MyttyRegistration(deviceToken: String(repeating: "0a", count: 32) + tag, environment: environment, relaySecret: "c2VjcmV0\(tag)=")
    }

    static func iterm(_ tag: String, sandbox: Bool = false, at registeredAt: UInt64 = 1_700_000_000_000) -> ITermRegistration {
        ITermRegistration(secretHash: String(repeating: "9f", count: 31) + tag, sandbox: sandbox, registeredAt: registeredAt)
    }

    static func myttyRegistrationsAreStoredReadAndReplaced(_ store: any PushStore) throws {
        XCTAssertNil(try store.mytty(pushID: pushID, now: 0))
        try store.putMytty(mytty("01"), pushID: pushID, expiresAt: 1_000)
        XCTAssertEqual(try store.mytty(pushID: pushID, now: 500), mytty("01"))
        XCTAssertNil(try store.mytty(pushID: "other-id", now: 500))

        try store.putMytty(mytty("02", .sandbox), pushID: pushID, expiresAt: 2_000)
        XCTAssertEqual(try store.mytty(pushID: pushID, now: 1_500), mytty("02", .sandbox), "replaced, with its new expiry")
        XCTAssertEqual(try store.deviceCount(now: 0), 1, "a replacement is not a second record")

        try store.putMytty(mytty("03"), pushID: pushID, expiresAt: 100)
        XCTAssertNil(try store.mytty(pushID: pushID, now: 1_500), "a replacement may also shorten the expiry")
    }

    static func itermRegistrationsAreStoredReadAndReplaced(_ store: any PushStore) throws {
        XCTAssertNil(try store.iterm(token: token, now: 0))
        try store.putITerm(iterm("01"), token: token, expiresAt: 1_000)
        XCTAssertEqual(try store.iterm(token: token, now: 500), iterm("01"))
        XCTAssertNil(try store.iterm(token: String(repeating: "cd", count: 32), now: 500))

        try store.putITerm(iterm("02", sandbox: true, at: 1_700_000_500_000), token: token, expiresAt: 2_000)
        XCTAssertEqual(try store.iterm(token: token, now: 1_500), iterm("02", sandbox: true, at: 1_700_000_500_000))
        XCTAssertEqual(try store.deviceCount(now: 0), 1)

        try store.putITerm(iterm("03"), token: token, expiresAt: 100)
        XCTAssertNil(try store.iterm(token: token, now: 1_500))
    }

    /// push.md §1: `push:<pushID>` and `device:<token>` never meet, even under the same string.
    static func theTwoProfilesAreSeparateNamespaces(_ store: any PushStore) throws {
        let shared = token
        try store.putMytty(mytty("01"), pushID: shared, expiresAt: 1_000)
        XCTAssertNil(try store.iterm(token: shared, now: 0))
        try store.putITerm(iterm("01"), token: shared, expiresAt: 1_000)
        XCTAssertEqual(try store.mytty(pushID: shared, now: 0), mytty("01"), "a Profile I write leaves Profile M alone")
        XCTAssertEqual(try store.deviceCount(now: 0), 2)

        try store.deleteMytty(pushID: shared)
        XCTAssertNil(try store.mytty(pushID: shared, now: 0))
        XCTAssertEqual(try store.iterm(token: shared, now: 0), iterm("01"), "a Profile M delete leaves Profile I alone")
        try store.putMytty(mytty("02"), pushID: shared, expiresAt: 1_000)
        try store.deleteITerm(token: shared)
        XCTAssertEqual(try store.mytty(pushID: shared, now: 0), mytty("02"))
        XCTAssertFalse(try store.renewMytty(pushID: "never-stored", expiresAt: 5_000, now: 0))
    }

    /// push.md §6: a record whose `expiresAt` is at or before `now` is gone, one millisecond
    /// earlier it is live.
    static func aRecordReadsAsAbsentFromItsExpiryTimeOn(_ store: any PushStore) throws {
        try store.putMytty(mytty("01"), pushID: pushID, expiresAt: 1_000)
        try store.putITerm(iterm("01"), token: token, expiresAt: 1_000)
        XCTAssertNotNil(try store.mytty(pushID: pushID, now: 999))
        XCTAssertNotNil(try store.iterm(token: token, now: 999))
        XCTAssertEqual(try store.deviceCount(now: 999), 2)
        XCTAssertNil(try store.mytty(pushID: pushID, now: 1_000))
        XCTAssertNil(try store.iterm(token: token, now: 1_000))
        XCTAssertEqual(try store.deviceCount(now: 1_000), 0)
        XCTAssertNil(try store.mytty(pushID: pushID, now: 1_001))
        XCTAssertNil(try store.iterm(token: token, now: 1_001))

        try store.putMytty(mytty("02"), pushID: "born-expired", expiresAt: 0)
        XCTAssertNil(try store.mytty(pushID: "born-expired", now: 0))
    }

    /// push.md §2.5 step 7: a delivery renews the registration — unless a permanent failure
    /// (or expiry) removed it meanwhile.
    static func aRenewalExtendsALiveRecordAndNeverResurrectsOne(_ store: any PushStore) throws {
        try store.putMytty(mytty("01"), pushID: pushID, expiresAt: 1_000)
        XCTAssertTrue(try store.renewMytty(pushID: pushID, expiresAt: 5_000, now: 999))
        XCTAssertEqual(try store.mytty(pushID: pushID, now: 4_999), mytty("01"), "extended, values untouched")
        XCTAssertNil(try store.mytty(pushID: pushID, now: 5_000), "to exactly the new expiry")
        XCTAssertTrue(try store.renewMytty(pushID: pushID, expiresAt: 5_000, now: 4_999), "renewing to the same expiry still counts")

        try store.deleteMytty(pushID: pushID)
        XCTAssertFalse(try store.renewMytty(pushID: pushID, expiresAt: 9_000, now: 0), "a deleted record stays deleted")
        XCTAssertNil(try store.mytty(pushID: pushID, now: 0))
        XCTAssertEqual(try store.deviceCount(now: 0), 0)

        try store.putMytty(mytty("02"), pushID: pushID, expiresAt: 1_000)
        XCTAssertFalse(try store.renewMytty(pushID: pushID, expiresAt: 9_000, now: 1_000), "expired at now")
        XCTAssertFalse(try store.renewMytty(pushID: pushID, expiresAt: 9_000, now: 2_000))
        XCTAssertNil(try store.mytty(pushID: pushID, now: 1_000))
        XCTAssertNil(try store.mytty(pushID: pushID, now: 8_999), "the failed renewals did not extend it")
        XCTAssertEqual(try store.pruneExpired(now: 1_000), 1, "and housekeeping still finds it expired")
    }

    static func deletesAreIdempotentAndTouchOnlyTheirProfile(_ store: any PushStore) throws {
        try store.deleteMytty(pushID: pushID)
        try store.deleteITerm(token: token)
        try store.putMytty(mytty("01"), pushID: pushID, expiresAt: 1_000)
        try store.putMytty(mytty("02"), pushID: "kept", expiresAt: 1_000)
        try store.putITerm(iterm("01"), token: token, expiresAt: 1_000)
        try store.putITerm(iterm("02"), token: "kept", expiresAt: 1_000)
        for _ in 0..<2 {
            try store.deleteMytty(pushID: pushID)
            try store.deleteITerm(token: token)
        }
        XCTAssertNil(try store.mytty(pushID: pushID, now: 0))
        XCTAssertNil(try store.iterm(token: token, now: 0))
        XCTAssertEqual(try store.mytty(pushID: "kept", now: 0), mytty("02"))
        XCTAssertEqual(try store.iterm(token: "kept", now: 0), iterm("02"))
        XCTAssertEqual(try store.deviceCount(now: 0), 2)
    }

    static func pruningRemovesExactlyTheExpiredRecordsOfBothProfiles(_ store: any PushStore) throws {
        XCTAssertEqual(try store.pruneExpired(now: 1_000), 0, "an empty store prunes nothing")
        try store.putMytty(mytty("01"), pushID: "m-before", expiresAt: 100)
        try store.putMytty(mytty("02"), pushID: "m-at", expiresAt: 150)
        try store.putMytty(mytty("03"), pushID: "m-after", expiresAt: 151)
        try store.putITerm(iterm("01"), token: "i-before", expiresAt: 1)
        try store.putITerm(iterm("02"), token: "i-at", expiresAt: 150)
        try store.putITerm(iterm("03"), token: "i-after", expiresAt: 10_000)

        XCTAssertEqual(try store.pruneExpired(now: 150), 4)
        // Read with an earlier clock: only removal, not the expiry rule, makes these absent.
        for pushID in ["m-before", "m-at"] { XCTAssertNil(try store.mytty(pushID: pushID, now: 0), pushID) }
        for token in ["i-before", "i-at"] { XCTAssertNil(try store.iterm(token: token, now: 0), token) }
        XCTAssertEqual(try store.mytty(pushID: "m-after", now: 150), mytty("03"))
        XCTAssertEqual(try store.iterm(token: "i-after", now: 150), iterm("03"))
        XCTAssertEqual(try store.deviceCount(now: 0), 2)
        XCTAssertEqual(try store.pruneExpired(now: 150), 0, "nothing left to prune")
        XCTAssertEqual(try store.pruneExpired(now: 151), 1)
        XCTAssertEqual(try store.deviceCount(now: 0), 1)
    }

    static func theDeviceCountCountsOnlyLiveRecordsOfBothProfiles(_ store: any PushStore) throws {
        XCTAssertEqual(try store.deviceCount(now: 0), 0)
        try store.putMytty(mytty("01"), pushID: "m1", expiresAt: 100)
        try store.putMytty(mytty("02"), pushID: "m2", expiresAt: 300)
        try store.putITerm(iterm("01"), token: "i1", expiresAt: 200)
        try store.putITerm(iterm("02"), token: "i2", expiresAt: 300)
        XCTAssertEqual(try store.deviceCount(now: 99), 4)
        XCTAssertEqual(try store.deviceCount(now: 100), 3)
        XCTAssertEqual(try store.deviceCount(now: 200), 2)
        XCTAssertEqual(try store.deviceCount(now: 300), 0)
        try store.deleteMytty(pushID: "m2")
        XCTAssertEqual(try store.deviceCount(now: 0), 3)
        XCTAssertEqual(try store.deviceCount(now: 250), 1, "expired ones are not counted before they are pruned")
    }

    /// What is stored is what is read: case, length and the extremes a signed 64-bit integer holds.
    static func valuesRoundTripExactly(_ store: any PushStore) throws {
        let hex = Array("0123456789abcdefABCDEF")
        let longToken = String((0..<200).map { hex[($0 * 7) % hex.count] })
        XCTAssertEqual(longToken.count, 200)
        XCTAssertNotEqual(longToken.lowercased(), longToken)
        XCTAssertNotEqual(longToken.uppercased(), longToken)

        let registration = MyttyRegistration(deviceToken: longToken, environment: .sandbox,
                                             relaySecret: "q+/Zz09AbCdEfGhIjKlMnOpQrStUvWxYz0123456789=")
        try store.putMytty(registration, pushID: pushID, expiresAt: 1_000)
        XCTAssertEqual(try store.mytty(pushID: pushID, now: 0), registration)
        XCTAssertNil(try store.mytty(pushID: pushID.uppercased(), now: 0), "ids are matched exactly, case included")
        for environment in PushEnvironment.allCases {
            let other = MyttyRegistration(deviceToken: longToken.uppercased(), environment: environment, relaySecret: "AAAA")
            try store.putMytty(other, pushID: environment.rawValue, expiresAt: 1_000)
            XCTAssertEqual(try store.mytty(pushID: environment.rawValue, now: 0), other)
        }

        let limit = UInt64(Int64.max)
        let cases: [(String, ITermRegistration)] = [
            (longToken, ITermRegistration(secretHash: String(repeating: "e3", count: 32), sandbox: true, registeredAt: limit)),
            (longToken.lowercased(), ITermRegistration(secretHash: String(repeating: "00", count: 32), sandbox: false, registeredAt: limit - 1)),
            (String(repeating: "f", count: 256), ITermRegistration(secretHash: String(repeating: "ff", count: 32), sandbox: false, registeredAt: 0)),
        ]
        for (token, registration) in cases { try store.putITerm(registration, token: token, expiresAt: limit) }
        for (token, registration) in cases {
            XCTAssertEqual(try store.iterm(token: token, now: limit - 1), registration, "registeredAt \(registration.registeredAt)")
            XCTAssertNil(try store.iterm(token: token, now: limit), "an expiry at the limit still expires")
        }
        XCTAssertEqual(try store.deviceCount(now: limit - 1), 3)
    }

    /// A renewal is a test and a write in one step: one that read "live" before a racing delete
    /// must not write the record back. Eight threads take each id in turn, starting together:
    /// one deletes it while the others renew it until the delete is done; ids stored already
    /// expired must refuse every renewal.
    static func renewalsRacingDeletesNeverLeaveADeletedRecordAlive(_ store: any PushStore) throws {
        let threads = 8, iterations = 200, now: UInt64 = 1_000
        for iteration in 0..<iterations {
            try store.putMytty(mytty("01"), pushID: raceID(iteration), expiresAt: iteration.isMultiple(of: 2) ? now + 1 : now)
        }
        let tally = Tally()
        let track = RaceTrack(runners: threads)
        let finished = DispatchGroup()
        for thread in 0..<threads {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                for iteration in 0..<iterations {
                    track.start(round: iteration)
                    do {
                        if iteration % threads == thread {
                            try store.deleteMytty(pushID: raceID(iteration))
                            track.finish(round: iteration)
                            continue
                        }
                        // Renew until the delete is done, so one is always in flight when it lands.
                        var renewing = true
                        while renewing {
                            renewing = !track.isFinished(round: iteration)
                            if try store.renewMytty(pushID: raceID(iteration), expiresAt: now + 1_000_000, now: now) {
                                tally.add(iteration.isMultiple(of: 2) ? (renewing ? "live renewed" : "renewed after the delete") : "expired renewed")
                            }
                        }
                    } catch {
                        tally.add("error: \(error)")
                        track.finish(round: iteration)
                    }
                }
            }
        }
        finished.wait()
        let counts = tally.counts
        XCTAssertNil(counts["expired renewed"], "an expired record was renewed")
        XCTAssertNil(counts["renewed after the delete"], "a deleted record was renewed")
        XCTAssertEqual(counts.keys.filter { $0.hasPrefix("error") }, [])
        for iteration in 0..<iterations {
            XCTAssertNil(try store.mytty(pushID: raceID(iteration), now: 0), "\(raceID(iteration)) was deleted, yet is back")
        }
        XCTAssertEqual(try store.deviceCount(now: 0), 0)
        XCTAssertEqual(try store.pruneExpired(now: .max), 0, "not even an expired copy remains")
    }

    static func raceID(_ iteration: Int) -> String { "race-\(iteration)" }
}

/// Lets racing threads start each round together, so they meet on the same record, and tells
/// the renewers when the round's delete is done. Both counts only grow: round `r` starts once
/// every runner has arrived at it, and is finished once `r + 1` deletes are.
private final class RaceTrack: Sendable {
    private let runners: Int
    private let arrivals = Atomic<Int>(0)
    private let finishedRounds = Atomic<Int>(0)

    init(runners: Int) { self.runners = runners }

    func start(round: Int) {
        arrivals.add(1, ordering: .acquiringAndReleasing)
        while arrivals.load(ordering: .acquiring) < runners * (round + 1) { sched_yield() }
    }

    func finish(round: Int) { finishedRounds.store(round + 1, ordering: .releasing) }

    func isFinished(round: Int) -> Bool { finishedRounds.load(ordering: .acquiring) > round }
}

private final class Tally: Sendable {
    private let tally = Locked<[String: Int]>([:])
    func add(_ kind: String) { tally.withLock { $0[kind, default: 0] += 1 } }
    var counts: [String: Int] { tally.withLock { $0 } }
}
