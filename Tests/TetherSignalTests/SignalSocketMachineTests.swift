@testable import TetherSignal
import TetherCrypto
import TetherEncoding
import TetherWire
import TetherSync
import XCTest

/// signaling.md §6 as one connection's machine sees it: events and an injected monotonic time
/// in, actions out. No socket, no timer, no sleep; the directory's, the registry's and the
/// issuer's answers are given as events.
final class SignalSocketMachineTests: XCTestCase {
    private typealias Machine = SignalSocketMachine

    /// When the challenge went out (monotonic ms, any origin).
    private let opened = MonotonicInstant.milliseconds(5_000_000)
    /// §12's challenge: bytes 00…1f.
    private let challengeBytes = (0..<32).map { UInt8($0) }
    private var challenge: String { Base64.encode(challengeBytes) }
    private let call = CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!
    private let issued = Issued(iceServers: [ICEServer(urls: ["stun:stun.example.com:3478"])], expiresAt: 1_700_003_600)

    private struct Identity {
        let key = Ed25519.PrivateKey()
        var id: SignalingID { SignalingID(key: key.publicKey.rawRepresentation) }

        func register(_ challenge: String) -> [UInt8] {
            let signature = key.signature(for: SignalingTranscript.register(challenge: challenge, id: id))
            return Array(RegisterMessage(id: id, signature: signature).json().utf8)
        }

        func signal(_ kind: SignalKind = .offer, to recipient: SignalingID, call: CallUUID, body: String = "e30=") -> SignalMessage {
            let signed = SignalingTranscript.signal(kind: kind, from: id, to: recipient, call: call, body: body)
            return SignalMessage(kind: kind, from: id, to: recipient, call: call, body: body, signature: key.signature(for: signed))
        }
    }

    private let alice = Identity(), bob = Identity()

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
    private func bytes(_ message: SignalMessage) -> [UInt8] { Array(message.json().utf8) }
    private func presence(_ ids: [SignalingID]) -> [UInt8] { Array(PresenceQuery(ids: ids).json().utf8) }

    private func error(_ code: SignalingErrorCode, call: CallUUID? = nil, kind: SignalKind? = nil) -> [SignalSocketAction] {
        [.count(.error(code)), .send(.error(code, call: call, kind: kind))]
    }

    private func close(_ code: SignalingErrorCode) -> SignalSocketAction {
        .close(code: Machine.closeCode(for: code), reason: code.rawValue, discardingUnsentOutput: false)
    }

    private func challenged(_ configuration: Machine.Configuration = .init()) -> Machine {
        var machine = Machine(configuration: configuration)
        XCTAssertEqual(machine.open(challenge: challengeBytes, now: opened), [.send(.challenge(challenge))])
        return machine
    }

    /// Through §6.1 for `identity`: challenge, register, reservation, claim (across nodes),
    /// issuance, routable.
    private func registered(_ identity: Identity, _ configuration: Machine.Configuration = .init()) -> Machine {
        var machine = challenged(configuration)
        XCTAssertEqual(machine.received(text: identity.register(challenge), now: opened + .milliseconds(1)), [.reserve(identity.id)])
        if configuration.clustered {
            XCTAssertEqual(machine.reserved(true, id: identity.id), [.claim(identity.id)])
            XCTAssertEqual(machine.claimed(true, id: identity.id), [.issue(identity.id)])
        } else {
            XCTAssertEqual(machine.reserved(true, id: identity.id), [.issue(identity.id)])
        }
        XCTAssertEqual(machine.issued(.success(issued), id: identity.id), [.markRoutable(identity.id, issued)])
        XCTAssertEqual(machine.markedRoutable(true, id: identity.id, issued: issued), [
            .count(.registration),
            .send(.registered(id: identity.id, iceServers: issued.iceServers, iceExpiresAt: issued.expiresAt)),
        ])
        XCTAssertTrue(machine.isRoutable)
        return machine
    }

    // MARK: §6.1 Registration

    func testOpeningSendsTheChallengeAtOnceAndItsDeadlineIsTheChallengeLifetimeLater() {
        let machine = challenged()
        XCTAssertEqual(challenge, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        XCTAssertEqual(machine.nextDeadline, opened + .milliseconds(10_000))
        XCTAssertFalse(machine.isRoutable)
    }

    func testARegistrationNotAnsweredWithinTheChallengeLifetimeClosesWithChallengeExpired() {
        var machine = challenged()
        XCTAssertEqual(machine.tick(now: opened + .milliseconds(9_999)), [], "early: nothing yet")
        XCTAssertEqual(machine.nextDeadline, opened + .milliseconds(10_000))
        XCTAssertEqual(machine.tick(now: opened + .milliseconds(10_000)), error(.challengeExpired) + [close(.challengeExpired)])
        XCTAssertEqual(close(.challengeExpired), .close(code: 1008, reason: "challenge_expired", discardingUnsentOutput: false))
        XCTAssertNil(machine.nextDeadline)
        XCTAssertEqual(machine.tick(now: opened + .milliseconds(20_000)), [])
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(20_000)), [], "the challenge is gone with the connection")
    }

    func testARegisterMoreThanTheChallengeLifetimeAfterTheChallengeClosesWithChallengeExpired() {
        var machine = challenged()
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(10_001)),
                       error(.challengeExpired) + [close(.challengeExpired)])
    }

    func testARegisterAtExactlyTheChallengeLifetimeIsStillInTime() {
        var machine = challenged()
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(10_000)), [.reserve(alice.id)])
    }

    func testAValidRegisterReservesTheIDAndStopsTheChallengeTimer() {
        var machine = challenged()
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(3_000)), [.reserve(alice.id)])
        XCTAssertNil(machine.nextDeadline)
        XCTAssertEqual(machine.tick(now: opened + .milliseconds(60_000)), [])
        XCTAssertEqual(machine.stage, .pending(alice.id, .reserving))
        XCTAssertFalse(machine.isRoutable, "reserved, not routable")
    }

    func testTheSpecificationsRegistrationVectorIsAccepted() {
        var machine = challenged()
        let id = "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5"
        let sig = "vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg=="
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"register","v":2,"id":"\#(id)","sig":"\#(sig)"}"#), now: opened),
                       [.reserve(SignalingID(canonical: id)!)])
    }

    func testARegisterSignedOverAnotherChallengeClosesWithBadSignature() {
        var machine = challenged()
        let other = Base64.encode([UInt8](repeating: 7, count: 32))
        XCTAssertEqual(machine.received(text: alice.register(other), now: opened), error(.badSignature) + [close(.badSignature)])
    }

    func testARegisterSignedByAnotherKeyClosesWithBadSignature() {
        var machine = challenged()
        let forged = bob.key.signature(for: SignalingTranscript.register(challenge: challenge, id: alice.id))
        let text = RegisterMessage(id: alice.id, signature: forged).json()
        XCTAssertEqual(machine.received(text: bytes(text), now: opened), error(.badSignature) + [close(.badSignature)])
    }

    func testAMalformedRegisterClosesWithBadMessage() {
        let sig = Base64.encode(alice.key.signature(for: SignalingTranscript.register(challenge: challenge, id: alice.id)))
        let malformed = [
            #"{"type":"register","v":2,"id":"\#(alice.id.canonical.lowercased())","sig":"\#(sig)"}"#,
            #"{"type":"register","v":2,"id":"CT2-\#(alice.id.canonical)","sig":"\#(sig)"}"#,
            #"{"type":"register","v":1,"id":"\#(alice.id.canonical)","sig":"\#(sig)"}"#,
            #"{"type":"register","v":2,"id":"\#(alice.id.canonical)","sig":"\#(Base64.encode([UInt8](repeating: 1, count: 63)))"}"#,
            #"{"type":"register","v":2,"id":"\#(alice.id.canonical)"}"#,
        ]
        for text in malformed {
            var machine = challenged()
            XCTAssertEqual(machine.received(text: bytes(text), now: opened), error(.badMessage) + [close(.badMessage)], text)
        }
    }

    func testAnIDReservedByAnotherConnectionClosesWithDuplicateIDAndReleasesNothing() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        XCTAssertEqual(machine.reserved(false, id: alice.id), error(.duplicateID) + [close(.duplicateID)],
                       "the other connection's reservation stays: a registration never replaces one")
    }

    func testAnIDAnotherNodeHoldsClosesWithDuplicateIDAndGivesTheClaimBack() {
        var machine = challenged(.init(clustered: true))
        _ = machine.received(text: alice.register(challenge), now: opened)
        XCTAssertEqual(machine.reserved(true, id: alice.id), [.claim(alice.id)])
        XCTAssertEqual(machine.claimed(false, id: alice.id), error(.duplicateID) + [.release(alice.id), close(.duplicateID)])
    }

    func testARegistryThatDoesNotAnswerTheClaimClosesUnavailable1013() {
        var machine = challenged(.init(clustered: true))
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        XCTAssertEqual(machine.claimed(nil, id: alice.id), error(.unavailable) + [.release(alice.id), close(.unavailable)])
        XCTAssertEqual(close(.unavailable), .close(code: 1013, reason: "unavailable", discardingUnsentOutput: false))
    }

    func testASecondRegisterWhileTheFirstIsPendingIsRegistrationPendingAndTheFirstGoesOn() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(1)), error(.registrationPending))
        XCTAssertEqual(machine.received(text: bob.register(challenge), now: opened + .milliseconds(1)), error(.registrationPending))
        XCTAssertEqual(machine.issued(.success(issued), id: alice.id), [.markRoutable(alice.id, issued)])
    }

    func testARegisterAfterRegistrationIsAlreadyRegisteredAndTheFirstStands() {
        var machine = registered(alice)
        XCTAssertEqual(machine.received(text: alice.register(challenge), now: opened + .milliseconds(2)), error(.alreadyRegistered))
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"register"}"#), now: opened + .milliseconds(2)), error(.alreadyRegistered))
        XCTAssertEqual(machine.stage, .registered(alice.id))
    }

    func testIssuedCredentialsMakeTheIDRoutableAndSendRegistered() {
        _ = registered(alice)
        _ = registered(alice, .init(clustered: true))
    }

    func testAFailedIssuanceClosesUnavailable1013AndReleasesTheReservation() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        let failure = IssuanceFailure(.upstream, "HTTP 500")
        XCTAssertEqual(machine.issued(.failure(failure), id: alice.id),
                       [.diagnostic("signal: credential issuance failed: upstream: HTTP 500")] + error(.unavailable)
                           + [.release(alice.id), close(.unavailable)])
    }

    func testAnIssuanceOverTheProcessLimitsClosesUnavailable1013() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        let actions = machine.issued(.failure(IssuanceFailure(.overLimit, "issuance limits reached")), id: alice.id)
        XCTAssertEqual(Array(actions.dropFirst()), error(.unavailable) + [.release(alice.id), close(.unavailable)])
    }

    func testAConnectionGoneWhileIssuingAbandonsTheIssuanceAndALateCompletionCannotRestorePresence() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        XCTAssertEqual(machine.closed(), [.abandonIssuance, .release(alice.id)])
        XCTAssertEqual(machine.issued(.success(issued), id: alice.id), [])
        XCTAssertFalse(machine.isRoutable)
    }

    func testAConnectionGoneWhileClaimingGivesTheClaimBackAndALateAnswerIsIgnored() {
        var machine = challenged(.init(clustered: true))
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        XCTAssertEqual(machine.closed(), [.release(alice.id)])
        XCTAssertEqual(machine.claimed(true, id: alice.id), [])
    }

    func testAReservationThatCannotBeMadeRoutableClosesInternal1011() {
        var machine = challenged()
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        _ = machine.issued(.success(issued), id: alice.id)
        XCTAssertEqual(machine.markedRoutable(false, id: alice.id, issued: issued), error(.internal) + [.release(alice.id), close(.internal)])
        XCTAssertEqual(close(.internal), .close(code: 1011, reason: "internal", discardingUnsentOutput: false))
    }

    func testSignalAndPresenceBeforeTheIDIsRoutableAreNotRegisteredAndKept() {
        var machine = challenged()
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"signal"}"#), now: opened), error(.notRegistered), "other fields unchecked")
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"presence","v":9}"#), now: opened), error(.notRegistered))
        _ = machine.received(text: alice.register(challenge), now: opened)
        _ = machine.reserved(true, id: alice.id)
        XCTAssertEqual(machine.received(text: bytes(alice.signal(to: bob.id, call: call)), now: opened), error(.notRegistered))
        XCTAssertEqual(machine.received(text: presence([bob.id]), now: opened), error(.notRegistered))
        XCTAssertEqual(machine.stage, .pending(alice.id, .issuing))
    }

    func testAMessageThatIsNotAJSONObjectWithAKnownTypeClosesBeforeRegistration() {
        for text in ["not json", "[]", "{}", #"{"type":"hello","v":2}"#, #"{"type":"register","type":"register"}"#, #"{"type":"challenge","v":2}"#] {
            var machine = challenged()
            XCTAssertEqual(machine.received(text: bytes(text), now: opened), error(.badMessage) + [close(.badMessage)], text)
        }
    }

    func testAMessageThatIsNotAJSONObjectWithAKnownTypeIsBadMessageAndKeptAfterRegistration() {
        var machine = registered(alice)
        XCTAssertEqual(machine.received(text: bytes("[]"), now: opened + .milliseconds(2)), error(.badMessage))
        XCTAssertEqual(machine.received(binary: [0xFF, 0xFE], now: opened + .milliseconds(2)), error(.badMessage))
        XCTAssertTrue(machine.isRoutable)
    }

    func testABinaryFrameIsReadAsTextAndOneThatIsNotUTF8ClosesWithBadMessageBeforeRegistration() {
        var machine = challenged()
        XCTAssertEqual(machine.received(binary: alice.register(challenge), now: opened), [.reserve(alice.id)])
        var other = challenged()
        XCTAssertEqual(other.received(binary: [0x7B, 0xC3, 0x28, 0x7D], now: opened), error(.badMessage) + [close(.badMessage)])
    }

    // MARK: §6.2 Forwarding

    func testASignalToARoutableRecipientIsForwardedUnchanged() {
        var machine = registered(alice)
        let signal = alice.signal(to: bob.id, call: call)
        XCTAssertEqual(machine.received(text: bytes(signal), now: opened + .milliseconds(2)), [.lookUpRecipient(signal)])
        XCTAssertEqual(machine.recipientLookedUp(signal, routable: true), [.count(.signal(.offer, .forwarded)), .forward(signal)])
    }

    func testASignalWithUnknownFieldsIsForwardedWithExactlyTheEnvelopeFields() {
        var machine = registered(alice)
        let signal = alice.signal(.candidate, to: bob.id, call: call)
        var text = signal.json()
        text.removeLast()
        text += #","extra":{"nested":[1,2]}}"#
        XCTAssertEqual(machine.received(text: bytes(text), now: opened + .milliseconds(2)), [.lookUpRecipient(signal)])
    }

    func testASignalToAnAbsentRecipientIsAnsweredOfflineAndNotQueued() {
        var machine = registered(alice)
        let signal = alice.signal(.answer, to: bob.id, call: call)
        _ = machine.received(text: bytes(signal), now: opened + .milliseconds(2))
        XCTAssertEqual(machine.recipientLookedUp(signal, routable: false),
                       [.count(.signal(.answer, .offline))] + error(.offline, call: call, kind: .answer))
        XCTAssertTrue(machine.isRoutable, "kept")
    }

    func testAcrossNodesASignalForAnIDNotHereGoesToItsNodeAndABounceIsAnsweredOffline() {
        var machine = registered(alice, .init(clustered: true))
        let signal = alice.signal(.channel, to: bob.id, call: call)
        _ = machine.received(text: bytes(signal), now: opened + .milliseconds(2))
        XCTAssertEqual(machine.recipientLookedUp(signal, routable: false), [.count(.signal(.channel, .toNode)), .forwardToNode(signal)])
        XCTAssertEqual(machine.recipientOffline(call: call, kind: .channel),
                       [.count(.signal(.channel, .offline))] + error(.offline, call: call, kind: .channel))
    }

    func testASignalWhoseFromIsNotTheRegisteredIDIsBadMessageAndKept() {
        var machine = registered(alice)
        let signal = bob.signal(to: alice.id, call: call)
        XCTAssertEqual(machine.received(text: bytes(signal), now: opened + .milliseconds(2)),
                       [.count(.signal(.offer, .badMessage))] + error(.badMessage, call: call, kind: .offer))
        XCTAssertTrue(machine.isRoutable)
    }

    func testASignalWithASignatureThatDoesNotVerifyIsBadSignatureAndKept() {
        var machine = registered(alice)
        let good = alice.signal(.reject, to: bob.id, call: call)
        let forged = SignalMessage(kind: .reject, from: alice.id, to: bob.id, call: call, body: good.body, signature: bob.key.signature(for: good.signedBytes))
        XCTAssertEqual(machine.received(text: bytes(forged), now: opened + .milliseconds(2)),
                       [.count(.signal(.reject, .badSignature))] + error(.badSignature, call: call, kind: .reject))
        XCTAssertTrue(machine.isRoutable)
    }

    func testAMalformedSignalsErrorNamesOnlyTheCallAndKindItCarriedValidly() {
        var machine = registered(alice)
        let sig = Base64.encode([UInt8](repeating: 0, count: 64))
        let wrongVersion = #"{"type":"signal","v":1,"kind":"close","from":"\#(alice.id.canonical)","to":"\#(bob.id.canonical)","call":"\#(call)","body":"e30=","sig":"\#(sig)"}"#
        XCTAssertEqual(machine.received(text: bytes(wrongVersion), now: opened + .milliseconds(2)),
                       [.count(.signal(.close, .badMessage))] + error(.badMessage, call: call, kind: .close))
        let unknownKind = #"{"type":"signal","v":2,"kind":"chat","from":"\#(alice.id.canonical)","to":"\#(bob.id.canonical)","call":"\#(call.text.uppercased())","body":"e30=","sig":"\#(sig)"}"#
        XCTAssertEqual(machine.received(text: bytes(unknownKind), now: opened + .milliseconds(2)),
                       [.count(.signal(nil, .badMessage))] + error(.badMessage))
        let toSelf = #"{"type":"signal","v":2,"kind":"offer","from":"\#(alice.id.canonical)","to":"\#(alice.id.canonical)","call":"\#(call)","body":"e30=","sig":"\#(sig)"}"#
        XCTAssertEqual(machine.received(text: bytes(toSelf), now: opened + .milliseconds(2)),
                       [.count(.signal(.offer, .badMessage))] + error(.badMessage, call: call, kind: .offer))
    }

    func testABodyOverThe32768ByteLimitIsBadMessageAndOneAtTheLimitIsForwarded() {
        var machine = registered(alice)
        func body(_ size: Int) -> String {
            Base64.encode(Array(#"{"a":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: size - 8) + Array(#""}"#.utf8))
        }
        let atLimit = alice.signal(to: bob.id, call: call, body: body(32_768))
        XCTAssertEqual(machine.received(text: bytes(atLimit), now: opened + .milliseconds(2)), [.lookUpRecipient(atLimit)])
        let over = alice.signal(to: bob.id, call: call, body: body(32_769))
        XCTAssertEqual(machine.received(text: bytes(over), now: opened + .milliseconds(2)),
                       [.count(.signal(.offer, .badMessage))] + error(.badMessage, call: call, kind: .offer))
        let notAnObject = alice.signal(to: bob.id, call: call, body: Base64.encode(Array("[]".utf8)))
        XCTAssertEqual(machine.received(text: bytes(notAnObject), now: opened + .milliseconds(2)),
                       [.count(.signal(.offer, .badMessage))] + error(.badMessage, call: call, kind: .offer))
    }

    func testTheFiftyFirstSignalWithinTenSecondsIsRateLimitedAndTheNextWindowForwardsAgain() {
        var machine = registered(alice)
        let signal = alice.signal(.candidate, to: bob.id, call: call)
        let start = opened + .milliseconds(100)
        for i in 0..<50 {
            XCTAssertEqual(machine.received(text: bytes(signal), now: start + .milliseconds(i * 200)), [.lookUpRecipient(signal)], "signal \(i + 1)")
        }
        XCTAssertEqual(machine.received(text: bytes(signal), now: start + .milliseconds(10_000)),
                       [.count(.signal(.candidate, .rateLimited))] + error(.rateLimited, call: call, kind: .candidate))
        XCTAssertTrue(machine.isRoutable, "kept")
        XCTAssertEqual(machine.received(text: bytes(signal), now: start + .milliseconds(10_001)), [.lookUpRecipient(signal)], "a new window")
    }

    func testSignalsRefusedForShapeOrSignatureDoNotCountTowardTheRate() {
        var machine = registered(alice)
        let forged = SignalMessage(kind: .offer, from: alice.id, to: bob.id, call: call, body: "e30=", signature: [UInt8](repeating: 9, count: 64))
        for _ in 0..<60 { _ = machine.received(text: bytes(forged), now: opened + .milliseconds(2)) }
        let signal = alice.signal(to: bob.id, call: call)
        for _ in 0..<50 { XCTAssertEqual(machine.received(text: bytes(signal), now: opened + .milliseconds(2)), [.lookUpRecipient(signal)]) }
    }

    func testASignalRateLimitOfZeroNeverRefuses() {
        var machine = registered(alice, .init(signalRateLimit: 0))
        let signal = alice.signal(to: bob.id, call: call)
        for _ in 0..<200 { XCTAssertEqual(machine.received(text: bytes(signal), now: opened + .milliseconds(2)), [.lookUpRecipient(signal)]) }
    }

    // MARK: §6.3 Presence

    func testAPresenceQueryIsAnsweredFromTheDirectoryInTheOrderAsked() {
        var machine = registered(alice)
        let carol = Identity()
        XCTAssertEqual(machine.received(text: presence([bob.id, carol.id]), now: opened + .milliseconds(2)), [.count(.presenceQuery), .lookUpPresence([bob.id, carol.id])])
        XCTAssertEqual(machine.presenceLookedUp([bob.id, carol.id], online: [false, true]),
                       [.send(.presence([(id: bob.id, online: false), (id: carol.id, online: true)]))])
    }

    func testAcrossNodesAPresenceQueryAsksTheOtherNodesAndSendsTheirAnswer() {
        var machine = registered(alice, .init(clustered: true))
        _ = machine.received(text: presence([bob.id]), now: opened + .milliseconds(2))
        XCTAssertEqual(machine.presenceLookedUp([bob.id], online: [false]), [.askNodes([bob.id], local: [false], asker: alice.id)])
        XCTAssertEqual(machine.presenceAnswered([bob.id], online: [true]), [.send(.presence([(id: bob.id, online: true)]))])
    }

    func testTheEleventhPresenceQueryWithinTenSecondsIsRateLimitedAndKept() {
        var machine = registered(alice)
        let start = opened + .milliseconds(100)
        for i in 0..<10 {
            XCTAssertEqual(machine.received(text: presence([bob.id]), now: start + .milliseconds(i)), [.count(.presenceQuery), .lookUpPresence([bob.id])])
        }
        XCTAssertEqual(machine.received(text: presence([bob.id]), now: start + .milliseconds(10_000)), error(.rateLimited))
        XCTAssertEqual(machine.received(text: presence([bob.id]), now: start + .milliseconds(10_001)), [.count(.presenceQuery), .lookUpPresence([bob.id])])
    }

    func testAPresenceQueryOfMoreThanSixteenIDsOrARepeatIsBadMessageAndCostsNoQuota() {
        var machine = registered(alice)
        let seventeen = (0..<17).map { _ in Identity().id }
        XCTAssertEqual(machine.received(text: presence(seventeen), now: opened + .milliseconds(2)), error(.badMessage))
        XCTAssertEqual(machine.received(text: presence([bob.id, bob.id]), now: opened + .milliseconds(2)), error(.badMessage))
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"presence","v":2,"ids":[]}"#), now: opened + .milliseconds(2)), error(.badMessage))
        let sixteen = Array(seventeen.prefix(16))
        for _ in 0..<10 {
            XCTAssertEqual(machine.received(text: presence(sixteen), now: opened + .milliseconds(2)), [.count(.presenceQuery), .lookUpPresence(sixteen)])
        }
        XCTAssertTrue(machine.isRoutable)
    }

    func testAPresenceAnswerArrivingAfterTheConnectionEndedIsDropped() {
        var machine = registered(alice, .init(clustered: true))
        _ = machine.received(text: presence([bob.id]), now: opened + .milliseconds(2))
        _ = machine.closed()
        XCTAssertEqual(machine.presenceLookedUp([bob.id], online: [false]), [])
        XCTAssertEqual(machine.presenceAnswered([bob.id], online: [true]), [])
    }

    // MARK: §6.4 Limits, §4 closes

    func testAForwardedSignalLeavingMoreThanOneMiBPendingClosesRateLimitedWithoutAnError() {
        var machine = registered(bob)
        XCTAssertEqual(machine.queued(outboundBytes: 1 << 20), [])
        XCTAssertEqual(machine.queued(outboundBytes: (1 << 20) + 1),
                       [.release(bob.id), .close(code: 1008, reason: "rate_limited", discardingUnsentOutput: true)])
        XCTAssertFalse(machine.isRoutable, "nothing more is delivered to it")
    }

    func testAConnectionThatStopsReadingIsClosedAsAnOverflowingOne() {
        var machine = challenged()
        XCTAssertEqual(machine.stalled(), [.close(code: 1008, reason: "rate_limited", discardingUnsentOutput: true)])
        XCTAssertNil(machine.nextDeadline)
        var routable = registered(alice)
        XCTAssertEqual(routable.stalled(), [.release(alice.id), .close(code: 1008, reason: "rate_limited", discardingUnsentOutput: true)])
        XCTAssertEqual(routable.stalled(), [])
    }

    func testAMessageOverTheSizeLimitIsAnsweredTooLargeAndClosed1009() {
        XCTAssertEqual(Machine.maxMessageBytes, 65_536)
        var machine = registered(alice)
        XCTAssertEqual(machine.tooLarge(), error(.tooLarge) + [.release(alice.id), .close(code: 1009, reason: "too_large", discardingUnsentOutput: false)])
        var early = challenged()
        XCTAssertEqual(early.tooLarge(), error(.tooLarge) + [close(.tooLarge)])
    }

    func testShutdownClosesGoingAwayWithoutAnErrorAndReleasesTheID() {
        var machine = registered(alice)
        XCTAssertEqual(machine.shutDown(), [.release(alice.id), .close(code: 1001, reason: "shutting_down", discardingUnsentOutput: false)])
        XCTAssertEqual(machine.shutDown(), [])
        var early = challenged()
        XCTAssertEqual(early.shutDown(), [.close(code: 1001, reason: "shutting_down", discardingUnsentOutput: false)])
        XCTAssertNil(early.nextDeadline)
    }

    func testADisconnectRemovesPresenceAndReservationAtOnce() {
        var machine = registered(alice)
        XCTAssertEqual(machine.closed(), [.release(alice.id)])
        XCTAssertFalse(machine.isRoutable)
        XCTAssertEqual(machine.closed(), [], "released once")
        var early = challenged()
        XCTAssertEqual(early.closed(), [], "nothing reserved yet")
        XCTAssertNil(early.nextDeadline, "the challenge timer goes with the connection")
    }

    func testALapsedClusterLeaseEndsTheRegistrationUnavailable1013() {
        var machine = registered(alice, .init(clustered: true))
        XCTAssertEqual(machine.end(.unavailable), error(.unavailable) + [.release(alice.id), close(.unavailable)])
        XCTAssertEqual(machine.end(.unavailable), [], "ended once")
    }

    func testNothingIsAnsweredOnceTheConnectionHasEnded() {
        var machine = registered(alice)
        let signal = alice.signal(to: bob.id, call: call)
        _ = machine.received(text: bytes(signal), now: opened + .milliseconds(2))
        _ = machine.received(text: bytes("[]"), now: opened + .milliseconds(2))
        _ = machine.closed()
        XCTAssertEqual(machine.recipientLookedUp(signal, routable: true), [])
        XCTAssertEqual(machine.recipientOffline(call: call, kind: .offer), [])
        XCTAssertEqual(machine.received(text: bytes(signal), now: opened + .milliseconds(3)), [])
        XCTAssertEqual(machine.received(text: bytes(#"{"type":"signal"}"#), now: opened + .milliseconds(3)), [])
        XCTAssertEqual(machine.received(binary: [0xFF], now: opened + .milliseconds(3)), [])
        XCTAssertEqual(machine.queued(outboundBytes: 2 << 20), [])
    }

    func testEveryClosingErrorCodeMapsToItsCloseCode() {
        XCTAssertEqual(Machine.closeCode(for: .internal), 1011)
        XCTAssertEqual(Machine.closeCode(for: .unavailable), 1013)
        XCTAssertEqual(Machine.closeCode(for: .tooLarge), 1009)
        for code in SignalingErrorCode.allCases where ![.internal, .unavailable, .tooLarge].contains(code) {
            XCTAssertEqual(Machine.closeCode(for: code), 1008, code.rawValue)
        }
    }
}
