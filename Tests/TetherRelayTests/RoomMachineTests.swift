import TetherCrypto
import TetherRelay
import TetherStore
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

final class RoomMachineTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "a", count: 64))!
    private let origin = "https://relay.example"
    private var store: InMemoryRoomStore!

    override func setUp() {
        store = InMemoryRoomStore()
    }

    /// Deterministic "random" bytes: each call returns a fresh run of one byte value.
    private func machine(attested: Bool = false, configure: (inout RoomMachine.Configuration) -> Void = { _ in }) -> StoredMachine {
        var configuration = RoomMachine.Configuration(origin: origin, attestationRequired: attested)
        configure(&configuration)
        let counter = Counter()
        return StoredMachine(RoomMachine(room: room, configuration: configuration) { count in
            [UInt8](repeating: counter.next(), count: count)
        }, store: store)
    }

    private func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    private func sends(_ actions: [RoomAction], to id: SocketID) -> [String] {
        actions.compactMap { if case let .send(target, message) = $0, target == id { return message } else { return nil } }
    }

    private func closes(_ actions: [RoomAction]) -> [(SocketID, UInt16, String)] {
        actions.compactMap { if case let .close(id, code, reason) = $0 { return (id, code, reason) } else { return nil } }
    }

    /// Connects `id`, sends a Hello and a Proof; returns the Proof's actions and the nonce.
    @discardableResult
    private func join(_ m: inout StoredMachine, _ id: SocketID, role: RelayRole, nonDisplacing: Bool = false,
                      proof: (([UInt8]) -> String)? = nil, now: RoomTime = 1_000) throws -> [RoomAction] {
        _ = try m.connected(id, now: now)
        let challenge = try m.frame(from: id, isText: true, payload: text(Hello(role: role, nonDisplacing: nonDisplacing).json), now: now)
        guard let message = sends(challenge, to: id).first, let value = JSONValue.parse(text(message)),
              case let .object(fields) = value, case let .string(nonceText)? = fields["nonce"],
              let nonce = try? Base64.decode(nonceText) else {
            XCTFail("no challenge: \(challenge)")
            return []
        }
        XCTAssertEqual(nonceText.count, 44)
        return try m.frame(from: id, isText: true, payload: text(proof?(nonce) ?? "{}"), now: now)
    }

    // MARK: Open mode

    func testOpenModePairingAdmitsMacThenPhoneAndSplices() throws {
        var m = machine()
        let mac = SocketID(1), phone = SocketID(2)
        XCTAssertEqual(sends(try join(&m, mac, role: .mac), to: mac), [#"{"ok":true}"#])
        let phoneResult = sends(try join(&m, phone, role: .phone), to: phone)
        XCTAssertEqual(phoneResult.count, 1)
        XCTAssertTrue(phoneResult[0].hasPrefix(#"{"ok":true,"registrationToken":""#))
        XCTAssertEqual(store.room(room)?.registrationTokens.count, 1)
        XCTAssertEqual(store.room(room)?.pairingCycles, 1)
        XCTAssertEqual(try m.frame(from: phone, isText: false, payload: [1, 2, 3], now: 2_000), [.forward(to: mac)])
        XCTAssertEqual(try m.frame(from: mac, isText: false, payload: [4], now: 2_000), [.forward(to: phone)])
    }

    func testAPhonesResultNamesATokenStorageAlreadyHoldsAndAFailedTokenWriteIsRefusedInternalError() throws {
        var m = machine()
        let mac = SocketID(1)
        _ = try join(&m, mac, role: .mac)
        // A full disk: reads answer, writes fail.
        store.setWriteFailure(StoreError("room database: database or disk is full"))
        let refused = try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(sends(refused, to: SocketID(2)), [], "no Result: it would name a token that was never stored")
        XCTAssertEqual(closes(refused).map { "\($0.0) \($0.1) \($0.2)" }, ["\(SocketID(2)) 1011 internal error"])
        XCTAssertNil(m.admitted(.phone))
        XCTAssertEqual(m.admitted(.mac), mac, "the parked Mac stays")

        store.setWriteFailure(nil)
        let admitted = try join(&m, SocketID(3), role: .phone)
        let result = try XCTUnwrap(sends(admitted, to: SocketID(3)).first)
        let token = try XCTUnwrap(result.split(separator: "\"").dropLast().last.map(String.init))
        XCTAssertNotNil(try store.registrationToken(token, in: RoomKey(room), now: 0), "stored before the Result was sent")
        XCTAssertFalse(admitted.contains { if case .persist(.registrationToken) = $0 { true } else { false } }, "not a write behind the Result")
    }

    func testAPhoneRetryingWhileItsMacIsAwayCostsNoTokenWrite() throws {
        var m = rawMachine()
        _ = m.connected(SocketID(2), now: .milliseconds(0))
        _ = m.frame(from: SocketID(2), isText: true, payload: phoneHello, now: 0)
        let load = m.frame(from: SocketID(2), isText: true, payload: text("{}"), now: 0)
        guard case let .load(step)? = load.first else { return XCTFail("\(load)") }
        XCTAssertNil(step.registrationToken)
        // A Mac cannot be admitted while the phone's Proof loads (its own Proof would wait behind
        // it), so a phone that proved alone is refused as it proved: alone.
        let answered = m.admissionLoaded(AdmissionAnswer(read: AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0))), now: 1)
        XCTAssertEqual(closes(answered).map(\.2), ["mac offline"])
    }

    func testBadHelloClosesWithoutAMessage() throws {
        var m = machine()
        _ = try m.connected(SocketID(1), now: 0)
        let actions = try m.frame(from: SocketID(1), isText: true, payload: text(#"{"v":"1","role":"mac"}"#), now: 0)
        XCTAssertEqual(actions, [.close(SocketID(1), code: 1008, reason: "bad hello")])
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 0), [], "frames after a close are dropped")
    }

    func testPhoneWithoutAParkedMacIsRefusedMacOffline() throws {
        var m = machine()
        let actions = try join(&m, SocketID(1), role: .phone)
        XCTAssertEqual(sends(actions, to: SocketID(1)), [#"{"ok":false,"error":"mac offline"}"#])
        XCTAssertEqual(closes(actions).map { $0.2 }, ["mac offline"])
        XCTAssertEqual(closes(actions).map { $0.1 }, [1008])
    }

    func testBadProofJSON() {
        var m = machine()
        XCTAssertEqual(closes(try join(&m, SocketID(1), role: .mac) { _ in "not json" }).map { $0.2 }, ["bad proof"])
    }

    // MARK: Attestation mode

    func testAttestedPhoneNeedsATicketWhichIsSpentEvenWhenRefused() throws {
        var m = machine(attested: true)
        try store.putTicket("T1", TicketRecord(expiresAt: 10_000, keyID: "kid", publicKey: "pk"), in: room)
        try store.putTicket("T2", TicketRecord(expiresAt: 10_000, keyID: "kid2", publicKey: "pk2"), in: room)
        try store.putTicket("old", TicketRecord(expiresAt: 500, keyID: "k", publicKey: "p"), in: room)
        XCTAssertEqual(closes(try join(&m, SocketID(1), role: .phone)).map { $0.2 }, ["ticket required"])
        XCTAssertEqual(closes(try join(&m, SocketID(2), role: .phone) { _ in #"{"ticket":"nope"}"# }).map { $0.2 }, ["bad ticket"])
        XCTAssertEqual(closes(try join(&m, SocketID(3), role: .phone) { _ in #"{"ticket":"old"}"# }).map { $0.2 }, ["bad ticket"], "expired")
        // A valid ticket with no mac parked: refused, and the ticket is gone.
        XCTAssertEqual(closes(try join(&m, SocketID(4), role: .phone) { _ in #"{"ticket":"T1"}"# }).map { $0.2 }, ["mac offline"])
        XCTAssertNil(store.room(room)?.tickets["T1"])
        // The mac parks with no credential; a ticketed phone is admitted and its token carries the key.
        XCTAssertEqual(sends(try join(&m, SocketID(5), role: .mac), to: SocketID(5)), [#"{"ok":true}"#])
        let admitted = try join(&m, SocketID(6), role: .phone) { _ in #"{"ticket":"T2","sig":"ignored"}"# }
        XCTAssertTrue(sends(admitted, to: SocketID(6))[0].contains("registrationToken"))
        XCTAssertEqual(store.room(room)?.registrationTokens.values.first?.attestKeyID, "kid2")
        XCTAssertEqual(closes(try join(&m, SocketID(7), role: .phone) { _ in #"{"ticket":"T2"}"# }).map { $0.2 }, ["bad ticket"], "single use")
    }

    // MARK: Established rooms

    func testEstablishedRoomsNeedAValidSignatureAndRefreshActivityEvenWhenRefused() throws {
        let secret = try RoomSecret(bytes: [UInt8](repeating: 0x5a, count: 32))
        store.setVerifier(Base64.encode(secret.verifier), of: room)
        var m = machine(attested: true)
        let key = secret.joinSigningKey()
        func signed(_ role: RelayRole) -> ([UInt8]) -> String {
            { nonce in #"{"sig":"\#(Base64.encode(key.signature(for: JoinTranscript(role: role, nonce: nonce, room: self.room, origin: self.origin).bytes)))"}"# }
        }
        XCTAssertEqual(closes(try join(&m, SocketID(1), role: .mac)).map { $0.2 }, ["signature required"])
        XCTAssertEqual(closes(try join(&m, SocketID(2), role: .mac) { _ in #"{"sig":"AAAA"}"# }).map { $0.2 }, ["bad signature"])
        XCTAssertEqual(closes(try join(&m, SocketID(3), role: .mac, proof: signed(.phone))).map { $0.2 }, ["bad signature"], "role is bound")
        XCTAssertNil(store.room(room)?.lastActivity)
        XCTAssertEqual(closes(try join(&m, SocketID(4), role: .phone, proof: signed(.phone), now: 7_000)).map { $0.2 }, ["mac offline"])
        XCTAssertEqual(store.room(room)?.lastActivity, 7_000, "refreshed before the slot checks")
        XCTAssertEqual(sends(try join(&m, SocketID(5), role: .mac, proof: signed(.mac)), to: SocketID(5)), [#"{"ok":true}"#])
        XCTAssertTrue(sends(try join(&m, SocketID(6), role: .phone, proof: signed(.phone)), to: SocketID(6))[0].contains("registrationToken"),
                      "every admitted phone gets a token")
        XCTAssertEqual(store.room(room)?.pairingCycles ?? 0, 0, "established rooms are exempt from the cycle cap")
    }

    func testMalformedVerifierMakesEveryJoinBadSignatureWithoutCrashing() {
        store.setVerifier("!!not base64", of: room)
        var m = machine()
        XCTAssertEqual(closes(try join(&m, SocketID(1), role: .mac) { _ in #"{"sig":"AAAA"}"# }).map { $0.2 }, ["bad signature"])
    }

    // MARK: Slots

    func testNewestMacDisplacesTheOldAndThePhoneIsReSpliced() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        let second = try join(&m, SocketID(3), role: .mac)
        XCTAssertEqual(closes(second).map { $0.0 }, [SocketID(1)])
        XCTAssertEqual(closes(second).map { $0.2 }, ["displaced"])
        XCTAssertEqual(try m.frame(from: SocketID(2), isText: false, payload: [9], now: 2_000), [.forward(to: SocketID(3))])
        XCTAssertEqual(try m.disconnected(SocketID(1)), [], "a socket the relay closed never propagates")
        XCTAssertEqual(store.room(room)?.pairingCycles, 0, "a fresh mac admission resets the cycles")
    }

    func testNonDisplacingPhoneIsRefusedSlotOccupiedButStillChargedACycle() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        let nse = try join(&m, SocketID(3), role: .phone, nonDisplacing: true)
        XCTAssertEqual(closes(nse).map { $0.2 }, ["slot occupied"])
        XCTAssertEqual(m.admitted(.phone), SocketID(2), "the incumbent is untouched")
        XCTAssertEqual(store.room(room)?.pairingCycles, 2)
    }

    func testTheNinthPhoneInOneMacParkTearsTheRoomDown() throws {
        var m = machine()
        try join(&m, SocketID(100), role: .mac)
        for i in 1...8 { XCTAssertTrue(sends(try join(&m, SocketID(UInt64(i)), role: .phone), to: SocketID(UInt64(i)))[0].contains("\"ok\":true")) }
        let ninth = try join(&m, SocketID(9), role: .phone)
        XCTAssertEqual(sends(ninth, to: SocketID(9)), [], "no Result before the teardown close")
        XCTAssertEqual(Set(closes(ninth).map { $0.0 }), [SocketID(100), SocketID(8), SocketID(9)])
        XCTAssertTrue(closes(ninth).allSatisfy { $0.1 == 1000 && $0.2 == "pairing cycle cap" })
        XCTAssertNil(store.room(room), "all room state deleted")
        XCTAssertTrue(m.isEmpty)
    }

    func testPreAuthCapClosesTheOldestPending() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)   // admitted: not counted
        for i in 2...5 { XCTAssertEqual(closes(try m.connected(SocketID(UInt64(i)), now: RoomTime(integerLiteral: UInt64(i)))).count, 0) }
        let fifth = try m.connected(SocketID(6), now: 6)
        XCTAssertEqual(closes(fifth).map { $0.0 }, [SocketID(2)])
        XCTAssertEqual(closes(fifth).map { $0.2 }, ["too many pending"])
    }

    func testTheOldestByArrivalIsEvictedEvenWhenItReachesTheRoomLast() throws {
        // A socket handed off from another loop can be adopted after later arrivals; the relay
        // gives each socket its arrival time and id, and eviction follows those.
        var m = machine()
        for i in 2...5 { _ = try m.connected(SocketID(UInt64(i)), now: 50) }
        let late = try m.connected(SocketID(1), now: 50)
        XCTAssertEqual(closes(late).map { $0.0 }, [SocketID(1)], "the first to arrive goes, though adopted last")
    }

    func testAdmissionDeadlineClosesPendingSocketsAfter15Seconds() throws {
        var m = machine()
        _ = try m.connected(SocketID(1), now: 0)
        try join(&m, SocketID(2), role: .mac, now: 0)
        XCTAssertEqual(m.nextDeadline, .milliseconds(15_000) + .nanoseconds(1))
        XCTAssertEqual(try m.tick(now: 15_000), [])
        XCTAssertEqual(try m.tick(now: 15_001), [.close(SocketID(1), code: 1008, reason: "admission timeout")])
        XCTAssertNil(m.nextDeadline)
    }

    func testTheFortyFirstProofInTenSecondsIsRateLimited() {
        var m = machine()
        for i in 1...40 { XCTAssertNotEqual(closes(try join(&m, SocketID(UInt64(i)), role: .mac, now: 100)).last?.2, "rate limited") }
        XCTAssertEqual(closes(try join(&m, SocketID(41), role: .mac, now: 10_100)).map { $0.2 }, ["rate limited"])
        XCTAssertNotEqual(closes(try join(&m, SocketID(42), role: .mac, now: 10_101)).last?.2, "rate limited", "a new window")
    }

    // MARK: Storage as a two-step transition

    private func rawMachine(attested: Bool = false) -> RoomMachine {
        RoomMachine(room: room, configuration: RoomMachine.Configuration(origin: origin, attestationRequired: attested)) {
            [UInt8](repeating: 7, count: $0)
        }
    }

    private let macHello = Array(Hello(role: .mac).json.utf8)
    private let phoneHello = Array(Hello(role: .phone).json.utf8)
    private let challenge = AdmissionReply.challenge(nonce: [UInt8](repeating: 7, count: 32))

    /// A signed join refreshes the room's stored activity only when it is a minute stale, so a
    /// reconnect storm of established rooms costs the store one read each and no write.
    func testASignedJoinRefreshesTheStoredActivityOnlyWhenItIsStale() {
        func touches(lastActivity: UInt64?, now: UInt64) -> [RoomAction] {
            var m = rawMachine()
            _ = m.connected(SocketID(1), now: .milliseconds(0))
            _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: RoomTime(monotonic: .milliseconds(0), wall: .milliseconds(now)))
            _ = m.frame(from: SocketID(1), isText: true, payload: text(#"{"sig":"AAAA"}"#), now: RoomTime(monotonic: .milliseconds(1), wall: .milliseconds(now)))
            let read = AdmissionRead(state: AdmissionState(verifier: "V", pairingCycles: 0), lastActivity: lastActivity)
            return m.admissionLoaded(read, joinVerified: true, now: RoomTime(monotonic: .milliseconds(2), wall: .milliseconds(now))).filter {
                if case .persist(.touch) = $0 { true } else { false }
            }
        }
        XCTAssertEqual(touches(lastActivity: 1_000_000 - 59_999, now: 1_000_000), [], "fresh: no write")
        XCTAssertEqual(touches(lastActivity: 1_000_000 - 60_000, now: 1_000_000), [.persist(.touch(at: 1_000_000))])
        XCTAssertEqual(touches(lastActivity: nil, now: 1_000_000), [.persist(.touch(at: 1_000_000))], "never recorded")
        XCTAssertEqual(touches(lastActivity: 2_000_000, now: 1_000_000), [], "another node's clock ahead of ours stands")
    }

    func testAProofWaitsForItsStorageAnswerAndTheFramesBehindItRunInOrderOnceItComes() {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        XCTAssertEqual(m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0), [.send(SocketID(1), challenge)])
        XCTAssertEqual(m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 5),
                       [.load(AdmissionLoad(query: AdmissionQuery(ticket: nil, now: 5)))], "nothing is admitted before storage answers")
        XCTAssertTrue(m.isAwaitingStorage)
        _ = m.connected(SocketID(2), now: .milliseconds(6))
        XCTAssertEqual(m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 6), [.holdReading(SocketID(1))],
                       "a pipelined second Proof waits, and its socket is not read meanwhile")
        XCTAssertEqual(m.frame(from: SocketID(1), isText: false, payload: [1], now: 6), [], "held once")
        XCTAssertEqual(m.frame(from: SocketID(2), isText: true, payload: phoneHello, now: 6), [.holdReading(SocketID(2))],
                       "another socket's Hello waits too: per-socket order needs no more, and the room's order is kept")
        XCTAssertNil(m.admitted(.mac))
        let answered = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 7)
        XCTAssertEqual(answered, [
            .log("relay \(RoomKey(room).logTag) admit role=mac via=open peer=false"),
            .send(SocketID(1), #"{"ok":true}"#),
            // The pipelined frames are now spliced data (no peer yet: dropped); the Hello is answered.
            .send(SocketID(2), challenge),
            .resumeReading(SocketID(1)),
            .resumeReading(SocketID(2)),
        ], "admitted exactly once (relay.md §6.9)")
        XCTAssertFalse(m.isAwaitingStorage)
        XCTAssertEqual(m.admitted(.mac), SocketID(1))
    }

    func testFramesPipelinedBehindAProofAreSplicedToThePeerOnceAdmitted() {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0)
        _ = m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 0)
        _ = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 0)
        _ = m.connected(SocketID(2), now: .milliseconds(1))
        _ = m.frame(from: SocketID(2), isText: true, payload: phoneHello, now: 1)
        _ = m.frame(from: SocketID(2), isText: true, payload: text("{}"), now: 1)
        XCTAssertEqual(m.frame(from: SocketID(2), isText: false, payload: [0xAB, 0xCD], now: 1), [.holdReading(SocketID(2))])
        let answered = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 2)
        let result = answered.firstIndex { if case .send(SocketID(2), _) = $0 { return true } else { return false } }
        let delivered = answered.firstIndex(of: .deliver(from: SocketID(2), to: SocketID(1), isText: false, payload: [0xAB, 0xCD]))
        XCTAssertNotNil(delivered, "the frame the phone sent right after its Proof reaches the mac: \(answered)")
        XCTAssertLessThan(result ?? .max, delivered ?? -1, "after the phone's Result")
        XCTAssertEqual(answered.last, .resumeReading(SocketID(2)))
    }

    func testASecondProofIsNotReadUntilTheFirstIsAnsweredSoThePairingCycleCountNeverLosesAnUpdate() {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0)
        _ = m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 0)
        _ = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 0)
        for id in [SocketID(2), SocketID(3)] {
            _ = m.connected(id, now: .milliseconds(1))
            _ = m.frame(from: id, isText: true, payload: phoneHello, now: 1)
        }
        let load = m.frame(from: SocketID(2), isText: true, payload: text("{}"), now: 2)
        XCTAssertEqual(load.map(\.loadQuery), [AdmissionQuery(ticket: nil, now: 2)])
        XCTAssertEqual(m.frame(from: SocketID(3), isText: true, payload: text(#"{"x":1}"#), now: 2), [.holdReading(SocketID(3))],
                       "no second read while the first Proof's count may still change")
        let first = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 4)), now: 3)
        XCTAssertTrue(first.contains(.persist(.pairingCycles(5))))
        XCTAssertEqual(first.last?.loadQuery, AdmissionQuery(ticket: nil, now: 3), "the waiting Proof reads after the first one's write")
        XCTAssertFalse(first.contains(.resumeReading(SocketID(3))), "its socket stays held until its own answer")
        let second = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 5)), now: 4)
        XCTAssertTrue(second.contains(.persist(.pairingCycles(6))))
        XCTAssertTrue(second.contains(.close(SocketID(2), code: 1000, reason: "displaced")))
        XCTAssertEqual(second.last, .resumeReading(SocketID(3)))
    }

    func testAnAnswerForASocketThatLeftMeanwhileAdmitsNothing() {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0)
        _ = m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 0)
        XCTAssertEqual(m.disconnected(SocketID(1)), [])
        XCTAssertEqual(m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 1), [])
        XCTAssertNil(m.admitted(.mac))
        XCTAssertTrue(m.isEmpty)
    }

    func testAnAttestedPhonesTicketIsAskedOfStorageWithTheProof() {
        var m = rawMachine(attested: true)
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: phoneHello, now: 0)
        XCTAssertEqual(m.frame(from: SocketID(1), isText: true, payload: text(#"{"ticket":"T"}"#), now: RoomTime(monotonic: .milliseconds(3), wall: .milliseconds(9))),
                       [.load(AdmissionLoad(query: AdmissionQuery(ticket: "T", now: 9)))], "expiry is judged on the wall clock: tickets are stamped with it")
    }

    func testASignedJoinsSignatureIsCheckedWithTheReadNotOnTheLoop() throws {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0)
        let actions = m.frame(from: SocketID(1), isText: true, payload: text(#"{"sig":"c2ln"}"#), now: 0)
        let nonce = [UInt8](repeating: 7, count: 32)
        XCTAssertEqual(actions, [.load(AdmissionLoad(query: AdmissionQuery(ticket: nil, now: 0),
                                                     join: JoinCheck(transcript: JoinTranscript(role: .mac, nonce: nonce, room: room, origin: origin).bytes, signature: "c2ln")))])
        let established = AdmissionRead(state: AdmissionState(verifier: "V", pairingCycles: 0))
        XCTAssertEqual(closes(m.admissionLoaded(established, joinVerified: false, now: 1)).map { $0.2 }, ["bad signature"])

        let secret = try RoomSecret(bytes: [UInt8](repeating: 0x33, count: 32))
        let check = JoinCheck(transcript: [1, 2, 3], signature: Base64.encode(secret.joinSigningKey().signature(for: [1, 2, 3])))
        XCTAssertTrue(check.isValid(for: Base64.encode(secret.verifier)))
        XCTAssertFalse(check.isValid(for: "!!"), "an undecodable verifier is a bad signature, not a crash")
        XCTAssertFalse(JoinCheck.verdict(check, against: AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0))))
    }

    // MARK: Time

    func testWallClockStepsNeitherClosePendingSocketsNorReopenTheAdmissionWindowNorRollTheQuota() throws {
        var m = machine { $0.dailyByteQuota = 100 }
        let day: UInt64 = 86_400_000
        let wall: UInt64 = 1_800_000_000_000
        _ = try m.connected(SocketID(50), now: 1_000)
        for i in 1...40 {
            _ = try join(&m, SocketID(UInt64(i)), role: .mac, now: RoomTime(monotonic: .milliseconds(1_000), wall: .milliseconds(i.isMultiple(of: 2) ? wall - day : wall + day)))
        }
        XCTAssertEqual(closes(try join(&m, SocketID(41), role: .mac, now: RoomTime(monotonic: .milliseconds(1_100), wall: .milliseconds(wall + 30 * day)))).map { $0.2 },
                       ["rate limited"], "a day's jump of the wall clock does not start a new window")
        XCTAssertEqual(try m.tick(now: 15_000), [], "the wall clock has no say in the admission deadline")
        XCTAssertEqual(try m.tick(now: 16_001), [.close(SocketID(50), code: 1008, reason: "admission timeout")])

        var n = machine { $0.dailyByteQuota = 100; $0.maxFramesPerSecond = 0 }
        try store.setQuota(QuotaRecord(dayStart: wall, bytes: 90), of: room)
        try join(&n, SocketID(1), role: .mac, now: RoomTime(monotonic: .milliseconds(20_000), wall: .milliseconds(wall)))
        try join(&n, SocketID(2), role: .phone, now: RoomTime(monotonic: .milliseconds(20_000), wall: .milliseconds(wall)))
        let stepped = try n.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 20), now: RoomTime(monotonic: .milliseconds(20_001), wall: .milliseconds(wall - day)))
        XCTAssertTrue(stepped.contains(.close(SocketID(1), code: 1008, reason: "daily quota exceeded")),
                      "a backwards step does not roll the quota day: \(stepped)")
    }

    func testAnEvictedRoomsRunningAdmissionWindowIsHandedToItsNextInstance() throws {
        var m = machine()
        for i in 1...40 { _ = try join(&m, SocketID(UInt64(i)), role: .mac, now: 100) }
        let kept = m.machine.admissionWindow
        XCTAssertFalse(kept.isExpired(now: .milliseconds(10_100)))
        let configuration = RoomMachine.Configuration(origin: origin, attestationRequired: false)
        var next = StoredMachine(RoomMachine(room: room, context: RoomMachine.Context(configuration: configuration), admissionWindow: kept), store: store)
        XCTAssertEqual(closes(try join(&next, SocketID(41), role: .mac, now: 5_000)).map { $0.2 }, ["rate limited"])
        XCTAssertTrue(kept.isExpired(now: .milliseconds(10_101)), "past the window it is not worth keeping")
    }

    // MARK: Back-pressure

    func testAStalledSocketIsClosedWriteStalledAndItsPeerStaysForTheNextOne() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(try m.settle(m.machine.stalled(SocketID(2)), now: 0),
                       [.log("relay \(RoomKey(room).logTag) stalled role=phone"), .close(SocketID(2), code: 1008, reason: "write stalled")])
        XCTAssertEqual(m.admitted(.mac), SocketID(1), "the sender is not punished for its peer")
        XCTAssertEqual(try m.disconnected(SocketID(2)), [], "the relay's own close never propagates")
        try join(&m, SocketID(3), role: .phone)
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [1], now: 2_000), [.forward(to: SocketID(3))])
        XCTAssertEqual(m.machine.stalled(SocketID(99)), [], "only an admitted socket can stall")
    }

    // MARK: After admission

    func testAPairingThatNeverCompletesLeavesNothingBehind() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        XCTAssertNil(store.room(room), "a mac park alone writes nothing")
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(store.room(room)?.pairingCycles, 1)
        try join(&m, SocketID(3), role: .mac)
        XCTAssertEqual(store.room(room)?.pairingCycles, 0, "a new park resets the count")
        try join(&m, SocketID(4), role: .phone)
        XCTAssertEqual(store.room(room)?.pairingCycles, 1)
        XCTAssertEqual(try m.disconnected(SocketID(4)), [.close(SocketID(3), code: 1001, reason: "peer gone")])
        XCTAssertEqual(store.room(room)?.pairingCycles, 0, "the park ended with its mac: the count goes")
        try store.pruneExpired(now: 1_000 + 300_001)
        XCTAssertNil(store.room(room), "once the registration token expires, nothing is left")
    }

    func testTheCountGoesWhenTheRelayClosesTheMacToo() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        _ = try m.closeAll(code: 1001, reason: "server shutting down")
        XCTAssertEqual(store.room(room)?.pairingCycles, 0)
    }

    func testPeerGoneWhenTheOtherSideLeaves() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(try m.disconnected(SocketID(2)), [.close(SocketID(1), code: 1001, reason: "peer gone")])
        XCTAssertTrue(m.isEmpty)
    }

    func testFrameCapsAndRateCloseTheOffenderAndItsPeer() throws {
        var m = machine { $0.maxFramesPerSecond = 3 }
        _ = try m.connected(SocketID(9), now: 0)
        XCTAssertEqual(try m.frame(from: SocketID(9), isText: false, payload: [UInt8](repeating: 0, count: 8_193), now: 0),
                       [.close(SocketID(9), code: 1009, reason: "frame too large")], "pre-auth cap 8 KiB")
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 262_145), now: 2_000),
                       [.close(SocketID(2), code: 1001, reason: "peer gone"), .close(SocketID(1), code: 1009, reason: "frame too large")])

        var n = machine { $0.maxFramesPerSecond = 3 }
        try join(&n, SocketID(1), role: .mac)
        try join(&n, SocketID(2), role: .phone)
        for _ in 0..<3 { XCTAssertEqual(try n.frame(from: SocketID(2), isText: false, payload: [1], now: 5_000), [.forward(to: SocketID(1))]) }
        XCTAssertEqual(try n.frame(from: SocketID(2), isText: false, payload: [1], now: 5_500),
                       [.close(SocketID(1), code: 1001, reason: "peer gone"), .close(SocketID(2), code: 1008, reason: "frame rate exceeded")])
    }

    func testTextFrameSizeCountsUTF16Units() throws {
        var m = machine()
        _ = try m.connected(SocketID(1), now: 0)
        // 4,097 "é" are 8,194 UTF-8 bytes but 4,097 UTF-16 units: under the 8 KiB cap, so it is parsed (a bad hello).
        let actions = try m.frame(from: SocketID(1), isText: true, payload: Array(String(repeating: "é", count: 4_097).utf8), now: 0)
        XCTAssertEqual(actions, [.close(SocketID(1), code: 1008, reason: "bad hello")])
    }

    func testTheUTF16LengthIsCountedFromUTF8AsJavaScriptWould() {
        for text in ["", "abc", "é", "€uro", "😀", "a😀é€\u{10FFFF}\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}"] {
            XCTAssertEqual(RoomMachine.utf16Length(ofUTF8: Array(text.utf8)), text.utf16.count, text)
        }
    }

    func testFramesBeforeAPeerIsAdmittedAreDropped() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [1], now: 2_000), [])
    }

    func testCloseAllClosesEverySocket() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        _ = try m.connected(SocketID(2), now: 0)
        XCTAssertEqual(try m.closeAll(code: 1000, reason: "room deleted"),
                       [.close(SocketID(1), code: 1000, reason: "room deleted"), .close(SocketID(2), code: 1000, reason: "room deleted")])
    }
}

/// Rules of relay.md §3–§4 checked one by one on the pure machine.
extension RoomMachineTests {
    private func token(in actions: [RoomAction], to id: SocketID) throws -> String {
        let result = try XCTUnwrap(sends(actions, to: id).first)
        guard case let .object(fields)? = JSONValue.parse(text(result)), case let .string(token)? = fields["registrationToken"] else {
            throw XCTSkip("no token in \(result)")
        }
        return token
    }

    /// §3.9 Tether: a mac parked at t = 0, housekeeping at t = 20 000 with nothing pending, then
    /// a socket at t = 30 000: its deadline is armed and kept all the same.
    func testAPendingSocketInALongLivedRoomStillGetsItsDeadline() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac, now: 0)
        XCTAssertNil(m.nextDeadline, "nothing pending")
        XCTAssertEqual(try m.tick(now: 20_000), [])
        XCTAssertEqual(closes(try m.connected(SocketID(2), now: 30_000)).count, 0)
        XCTAssertEqual(m.nextDeadline, .milliseconds(45_000) + .nanoseconds(1))
        XCTAssertEqual(try m.tick(now: 45_000), [])
        XCTAssertEqual(try m.tick(now: 45_001), [.close(SocketID(2), code: 1008, reason: "admission timeout")])
        XCTAssertEqual(m.admitted(.mac), SocketID(1), "the parked mac is untouched")
        XCTAssertNil(m.nextDeadline)
    }

    /// §3.3: each socket sends one Hello; its next frame is its Proof, whatever it looks like.
    /// Hellos themselves are not rate-limited.
    func testASecondHelloOnASocketIsItsProof() throws {
        let hello = text(Hello(role: .mac).json)
        var m = machine()
        _ = try m.connected(SocketID(1), now: 0)
        XCTAssertEqual(sends(try m.frame(from: SocketID(1), isText: true, payload: hello, now: 0), to: SocketID(1)).count, 1, "the challenge")
        XCTAssertEqual(sends(try m.frame(from: SocketID(1), isText: true, payload: hello, now: 0), to: SocketID(1)), [#"{"ok":true}"#],
                       "open mode: the second Hello is a Proof, and admits")

        store.setVerifier(Base64.encode(try RoomSecret(bytes: [UInt8](repeating: 0x21, count: 32)).verifier), of: room)
        var e = machine()
        _ = try e.connected(SocketID(2), now: 0)
        _ = try e.frame(from: SocketID(2), isText: true, payload: hello, now: 0)
        let refused = try e.frame(from: SocketID(2), isText: true, payload: hello, now: 0)
        XCTAssertEqual(sends(refused, to: SocketID(2)), [#"{"ok":false,"error":"signature required"}"#], "an established room: a Proof with no sig")
        XCTAssertEqual(closes(refused).map { $0.2 }, ["signature required"])

        var h = machine()
        for i in 10..<60 {
            _ = try h.connected(SocketID(UInt64(i)), now: RoomTime(integerLiteral: UInt64(i)))
            XCTAssertEqual(sends(try h.frame(from: SocketID(UInt64(i)), isText: true, payload: hello, now: 100), to: SocketID(UInt64(i))).count, 1,
                           "Hello \(i - 9) in one room is answered: Hellos are not counted")
        }
    }

    /// §3.4 step 1: the window counts every Proof, before parsing, whatever its role or outcome.
    func testEveryProofOutcomeCountsTowardTheAdmissionWindow() {
        var m = machine()
        for i in 1...40 {
            let role: RelayRole = i.isMultiple(of: 2) ? .phone : .mac
            XCTAssertEqual(closes(try join(&m, SocketID(UInt64(i)), role: role, proof: { _ in "not json" }, now: 100)).map { $0.2 }, ["bad proof"])
        }
        XCTAssertEqual(closes(try join(&m, SocketID(41), role: .mac, now: 10_100)).map { $0.2 }, ["rate limited"],
                       "forty unparseable Proofs used the window up")
    }

    /// §3.5 step 1: a pairing-mode mac resets the cycles even when it is then refused.
    func testANonDisplacingMacRefusedSlotOccupiedStillResetsTheCycles() throws {
        var m = machine()
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(store.room(room)?.pairingCycles, 1)
        let refused = try join(&m, SocketID(3), role: .mac, nonDisplacing: true)
        XCTAssertEqual(closes(refused).map { $0.2 }, ["slot occupied"])
        XCTAssertEqual(m.admitted(.mac), SocketID(1), "the incumbent stays")
        XCTAssertEqual(store.room(room)?.pairingCycles, 0)
    }

    /// §3.5 step 2.1: a mac that has sent its Hello but not proved is not a mac in the room.
    func testAPendingMacDoesNotSatisfyTheMacPresenceRule() throws {
        var m = machine()
        _ = try m.connected(SocketID(1), now: 0)
        _ = try m.frame(from: SocketID(1), isText: true, payload: text(Hello(role: .mac).json), now: 0)
        let phone = try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(sends(phone, to: SocketID(2)), [#"{"ok":false,"error":"mac offline"}"#])
        XCTAssertEqual(closes(phone).map { "\($0.0) \($0.1) \($0.2)" }, ["\(SocketID(2)) 1008 mac offline"])
    }

    /// §3.5 step 6.2 and §4: the token is valid while expiresAt ≥ now, expiresAt being the
    /// admission's wall time + 300 000 ms.
    func testARegistrationTokenLivesExactlyFiveMinutes() throws {
        let wall: UInt64 = 1_800_000_000_000
        var m = machine()
        try join(&m, SocketID(1), role: .mac, now: RoomTime(monotonic: .milliseconds(5), wall: .milliseconds(wall)))
        let token = try token(in: try join(&m, SocketID(2), role: .phone, now: RoomTime(monotonic: .milliseconds(6), wall: .milliseconds(wall))), to: SocketID(2))
        XCTAssertEqual(store.room(room)?.registrationTokens[token]?.expiresAt, wall + 300_000)
        XCTAssertNotNil(try store.registrationToken(token, in: RoomKey(room), now: wall + 300_000), "still valid at exactly five minutes")
        XCTAssertNil(try store.registrationToken(token, in: RoomKey(room), now: wall + 300_001))
    }

    /// §3.9: the cap is enforced when a socket is adopted, and only then.
    func testThePreAuthCapIsCheckedOnlyOnConnect() throws {
        var m = machine()
        for i in 1...4 { XCTAssertEqual(closes(try m.connected(SocketID(UInt64(i)), now: RoomTime(integerLiteral: UInt64(i)))).count, 0) }
        for i in 1...4 {
            XCTAssertEqual(closes(try m.frame(from: SocketID(UInt64(i)), isText: true, payload: text(Hello(role: .mac).json), now: 10)).count, 0,
                           "a Hello evicts no one")
        }
        XCTAssertEqual(try m.tick(now: 20), [])
        XCTAssertEqual(sends(try m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 30), to: SocketID(1)), [#"{"ok":true}"#])
        XCTAssertEqual(closes(try m.connected(SocketID(5), now: 40)).count, 0, "the admitted socket left the count: 4 pending")
        let sixth = try m.connected(SocketID(6), now: 50)
        XCTAssertEqual(closes(sixth).map { "\($0.0) \($0.2)" }, ["\(SocketID(2)) too many pending"], "the oldest pending, not the admitted mac")
    }

    /// §3.11 step 2.1: one window for both directions; it restarts only once now − start > 1000.
    func testTheFrameWindowIsSharedByBothDirectionsAndResetsAfterASecond() throws {
        var m = machine { $0.maxFramesPerSecond = 3 }
        try join(&m, SocketID(1), role: .mac)
        try join(&m, SocketID(2), role: .phone)
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [1], now: 5_000), [.forward(to: SocketID(2))])
        XCTAssertEqual(try m.frame(from: SocketID(2), isText: false, payload: [1], now: 5_500), [.forward(to: SocketID(1))])
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [1], now: 6_000), [.forward(to: SocketID(2))],
                       "start + 1000 is still the window: its third frame")
        XCTAssertEqual(try m.frame(from: SocketID(2), isText: false, payload: [1], now: 6_000),
                       [.close(SocketID(1), code: 1001, reason: "peer gone"), .close(SocketID(2), code: 1008, reason: "frame rate exceeded")],
                       "the fourth in the window, from the other direction")

        var n = machine { $0.maxFramesPerSecond = 3 }
        try join(&n, SocketID(1), role: .mac)
        try join(&n, SocketID(2), role: .phone)
        for id in [SocketID(1), SocketID(2), SocketID(1)] { _ = try n.frame(from: id, isText: false, payload: [1], now: 5_000) }
        XCTAssertEqual(try n.frame(from: SocketID(2), isText: false, payload: [1], now: 6_001), [.forward(to: SocketID(1))], "a new window")
    }

    /// §3.11 step 2.3 and §3.12: a text frame is delivered as text, byte for byte; a frame with no
    /// peer to go to is dropped but still counts toward the rate and the quota.
    func testTextStaysTextAndDroppedFramesStillCount() throws {
        var m = rawMachine()
        _ = m.connected(SocketID(1), now: .milliseconds(0))
        _ = m.frame(from: SocketID(1), isText: true, payload: macHello, now: 0)
        _ = m.frame(from: SocketID(1), isText: true, payload: text("{}"), now: 0)
        _ = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 0)
        _ = m.connected(SocketID(2), now: .milliseconds(1))
        _ = m.frame(from: SocketID(2), isText: true, payload: phoneHello, now: 1)
        _ = m.frame(from: SocketID(2), isText: true, payload: text("{}"), now: 1)
        let words = Array("héllo, wörld".utf8)
        XCTAssertEqual(m.frame(from: SocketID(2), isText: true, payload: words, now: 1), [.holdReading(SocketID(2))])
        let answered = m.admissionLoaded(AdmissionRead(state: AdmissionState(verifier: nil, pairingCycles: 0)), now: 2)
        XCTAssertTrue(answered.contains(.deliver(from: SocketID(2), to: SocketID(1), isText: true, payload: words)), "\(answered)")

        var q = machine { $0.dailyByteQuota = 100; $0.maxFramesPerSecond = 0 }
        try join(&q, SocketID(1), role: .mac)
        XCTAssertEqual(try q.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 60), now: 2_000), [], "no peer: dropped")
        XCTAssertEqual(closes(try q.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 41), now: 2_000)).map { "\($0.1) \($0.2)" },
                       ["1008 daily quota exceeded"], "60 + 41 dropped bytes are over a 100-byte quota")

        var r = machine { $0.maxFramesPerSecond = 2 }
        try join(&r, SocketID(1), role: .mac)
        for _ in 0..<2 { XCTAssertEqual(try r.frame(from: SocketID(1), isText: false, payload: [1], now: 3_000), []) }
        XCTAssertEqual(try r.frame(from: SocketID(1), isText: false, payload: [1], now: 3_000),
                       [.close(SocketID(1), code: 1008, reason: "frame rate exceeded")], "dropped frames count toward the rate too")
    }

    /// §4.2: a ticket is bound to the room that issued it.
    func testATicketIssuedInAnotherRoomIsBadTicket() throws {
        let other = RoomName(header: String(repeating: "b", count: 64))!
        try store.putTicket("TB", TicketRecord(expiresAt: 10_000, keyID: "kid", publicKey: "pk"), in: other)
        var m = machine(attested: true)
        try join(&m, SocketID(1), role: .mac)
        let refused = try join(&m, SocketID(2), role: .phone) { _ in #"{"ticket":"TB"}"# }
        XCTAssertEqual(sends(refused, to: SocketID(2)), [#"{"ok":false,"error":"bad ticket"}"#])
        XCTAssertEqual(closes(refused).map { "\($0.1) \($0.2)" }, ["1008 bad ticket"])
        XCTAssertNotNil(store.room(other)?.tickets["TB"], "the other room's ticket is untouched")
    }

    /// §4.6: a ticket is spent at the Proof, before the slot checks, whatever they then decide.
    func testATicketIsSpentEvenWhenThePhoneIsRefusedSlotOccupiedOrKilledByTheCycleCap() throws {
        var m = machine(attested: true)
        for name in ["P", "N"] + (1...7).map({ "C\($0)" }) {
            try store.putTicket(name, TicketRecord(expiresAt: 10_000, keyID: "kid-\(name)", publicKey: "pk"), in: room)
        }
        func ticket(_ name: String) -> ([UInt8]) -> String { { _ in #"{"ticket":"\#(name)"}"# } }
        try join(&m, SocketID(1), role: .mac)
        XCTAssertTrue(sends(try join(&m, SocketID(2), role: .phone, proof: ticket("P")), to: SocketID(2))[0].contains("\"ok\":true"))
        XCTAssertEqual(closes(try join(&m, SocketID(3), role: .phone, nonDisplacing: true, proof: ticket("N"))).map { $0.2 }, ["slot occupied"])
        XCTAssertNil(store.room(room)?.tickets["N"], "spent though refused")
        XCTAssertEqual(closes(try join(&m, SocketID(4), role: .phone, proof: ticket("N"))).map { $0.2 }, ["bad ticket"])
        // Cycles so far: P and N (charged before its slot check). C1–C6 are the 3rd to 8th; C7 is the 9th.
        for i in 1...6 {
            XCTAssertTrue(sends(try join(&m, SocketID(UInt64(10 + i)), role: .phone, proof: ticket("C\(i)")), to: SocketID(UInt64(10 + i)))[0]
                .contains("\"ok\":true"), "C\(i)")
        }
        XCTAssertEqual(Set(closes(try join(&m, SocketID(17), role: .phone, proof: ticket("C7"))).map { $0.2 }), ["pairing cycle cap"])
        try join(&m, SocketID(20), role: .mac)
        XCTAssertEqual(closes(try join(&m, SocketID(21), role: .phone, proof: ticket("C7"))).map { $0.2 }, ["bad ticket"],
                       "the ninth phone's ticket went with it")
    }
}

final class DailyQuotaTests: XCTestCase {
    private let room = RoomName(header: String(repeating: "b", count: 64))!

    private func admittedPair(_ store: InMemoryRoomStore, quota: Int64, flush: Int64 = 4_194_304) throws -> StoredMachine {
        var configuration = RoomMachine.Configuration(origin: "https://r.example", attestationRequired: false)
        configuration.dailyByteQuota = quota
        configuration.quotaFlushStep = flush
        configuration.maxFramesPerSecond = 0
        var m = StoredMachine(RoomMachine(room: room, configuration: configuration) { [UInt8](repeating: 1, count: $0) }, store: store)
        for (id, role) in [(SocketID(1), RelayRole.mac), (SocketID(2), .phone)] {
            _ = try m.connected(id, now: 0)
            _ = try m.frame(from: id, isText: true, payload: Array(Hello(role: role).json.utf8), now: 0)
            _ = try m.frame(from: id, isText: true, payload: Array("{}".utf8), now: 0)
        }
        return m
    }

    func testTrippingTheQuotaClosesEverySocketAndPersistsTheRecord() throws {
        let store = InMemoryRoomStore()
        var m = try admittedPair(store, quota: 100)
        _ = try m.connected(SocketID(3), now: 10)   // a pre-auth socket is closed too
        XCTAssertEqual(try m.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 60), now: 10), [.forward(to: SocketID(2))])
        XCTAssertNil(store.room(room)?.quota, "small counts are not flushed")
        let tripped = try m.frame(from: SocketID(2), isText: false, payload: [UInt8](repeating: 0, count: 41), now: 20)
        XCTAssertEqual(Set(tripped.compactMap { if case let .close(id, 1008, "daily quota exceeded") = $0 { return id } else { return nil } }),
                       [SocketID(1), SocketID(2), SocketID(3)])
        XCTAssertFalse(tripped.contains(.forward(to: SocketID(1))), "the tripping frame is not forwarded")
        XCTAssertEqual(store.room(room)?.quota, QuotaRecord(dayStart: 10, bytes: 101))
    }

    func testARestartedRoomResumesTheWindowAndRollsAfter24Hours() throws {
        let store = InMemoryRoomStore()
        try store.setQuota(QuotaRecord(dayStart: 0, bytes: 95), of: room)
        var m = try admittedPair(store, quota: 100)
        XCTAssertTrue(try m.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 6), now: 1_000).contains {
            if case .close(_, 1008, "daily quota exceeded") = $0 { return true } else { return false }
        }, "the persisted count carries over")
        var n = try admittedPair(store, quota: 100)
        XCTAssertEqual(try n.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 50), now: 86_400_000),
                       [.forward(to: SocketID(2))], "a new day")
        XCTAssertEqual(store.room(room)?.quota, QuotaRecord(dayStart: 86_400_000, bytes: 50), "the roll-over is persisted, with the frame that rolled it")
    }

    func testCountsAreFlushedEveryStep() throws {
        let store = InMemoryRoomStore()
        var m = try admittedPair(store, quota: 1_000_000, flush: 100)
        for _ in 0..<3 { _ = try m.frame(from: SocketID(1), isText: false, payload: [UInt8](repeating: 0, count: 40), now: 5) }
        XCTAssertEqual(store.room(room)?.quota?.bytes, 120)
    }
}

/// Fresh "random" bytes per call (a run of one value), shared by a machine's calls.
final class Counter: @unchecked Sendable {   // tests call it from one thread
    private var value: UInt8 = 0
    func next() -> UInt8 {
        value &+= 1
        return value
    }
}

/// A machine driven as the relay drives it, with storage answered at once: each `.load` is run
/// against the store and its answer fed back, each `.persist` applied in order. What remains are
/// the I/O actions a test asserts on (read holds too, which only appear while a load is pending).
final class StoredMachine {
    var machine: RoomMachine
    let store: any RoomStore

    init(_ machine: RoomMachine, store: any RoomStore) {
        self.machine = machine
        self.store = store
    }

    func settle(_ actions: [RoomAction], now: RoomTime) throws -> [RoomAction] {
        var output: [RoomAction] = []
        for action in actions {
            switch action {
            // As the relay: a write nobody waits for that fails is only counted; a load that fails
            // is answered.
            case let .persist(write): try? store.apply(write, to: machine.key)
            case let .load(step):
                let answer = try? step.run(on: store, room: machine.key)
                output += try settle(answer.map { machine.admissionLoaded($0, now: now) } ?? machine.admissionFailed(now: now), now: now)
            case .holdReading, .resumeReading: break
            case let .deliver(_, target, _, _): output.append(.forward(to: target))
            default: output.append(action)
            }
        }
        return output
    }

    func connected(_ id: SocketID, now: RoomTime) throws -> [RoomAction] { try settle(machine.connected(id, now: now.monotonic), now: now) }
    func frame(from id: SocketID, isText: Bool, payload: [UInt8], now: RoomTime) throws -> [RoomAction] {
        try settle(machine.frame(from: id, isText: isText, payload: payload, now: now), now: now)
    }
    func disconnected(_ id: SocketID) throws -> [RoomAction] { try settle(machine.disconnected(id), now: 0) }
    func closeAll(code: UInt16, reason: String) throws -> [RoomAction] { try settle(machine.closeAll(code: code, reason: reason), now: 0) }
    func tick(now: RoomTime) throws -> [RoomAction] { try settle(machine.tick(now: now.monotonic), now: now) }
    func admitted(_ role: RelayRole) -> SocketID? { machine.admitted(role) }
    var isEmpty: Bool { machine.isEmpty }
    var nextDeadline: MonotonicInstant? { machine.nextDeadline }
}

extension RoomMachine {
    /// Storage's answer as the lane gives it when every write it was asked for succeeded.
    mutating func admissionLoaded(_ read: AdmissionRead, joinVerified: Bool = false, now: RoomTime) -> [RoomAction] {
        admissionLoaded(AdmissionAnswer(read: read, joinVerified: joinVerified, tokenStored: true), now: now)
    }
}

extension RoomAction {
    /// The query of a `.load` (nil for any other action).
    var loadQuery: AdmissionQuery? {
        if case let .load(step) = self { step.query } else { nil }
    }
}
