@testable import TetherCall
import TetherCrypto
import TetherWire
import TetherSync
import XCTest

/// The client's side of one signaling connection (signaling.md §5, §6.1), message by message.
final class SignalingSessionTests: XCTestCase {
    let alice = CallIdentityTests.alice()
    let challenge = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func registered() -> SignalingSession {
        var session = SignalingSession(identity: alice)
        _ = session.receive(bytes(SignalingServerMessage.challenge(challenge).json()))
        _ = session.receive(bytes(SignalingServerMessage.registered(id: alice.id, iceServers: [], iceExpiresAt: 1_700_003_600).json()))
        XCTAssertTrue(session.isRegistered)
        return session
    }

    func testTheChallengeIsAnsweredWithTheVectorRegistration() {
        var session = SignalingSession(identity: alice)
        let outputs = session.receive(bytes(SignalingServerMessage.challenge(challenge).json()))
        XCTAssertEqual(outputs, [.send(#"{"type":"register","v":2,"id":"BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5","sig":"vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg=="}"#)])
        let servers = [ICEServer(urls: ["turn:t.example:3478?transport=udp"], username: "u", credential: "c")]
        let done = session.receive(bytes(SignalingServerMessage.registered(id: alice.id, iceServers: servers, iceExpiresAt: 1_700_003_600).json()))
        XCTAssertEqual(done, [.registered(SignalingRegistration(id: alice.id, iceServers: servers, iceExpiresAt: 1_700_003_600))])
    }

    func testASecondChallengeOrARegistrationOfAnotherIDEndsTheSession() {
        var session = SignalingSession(identity: alice)
        _ = session.receive(bytes(SignalingServerMessage.challenge(challenge).json()))
        XCTAssertEqual(session.receive(bytes(SignalingServerMessage.challenge(challenge).json())),
                       [.fail(.protocolViolation("unexpected challenge message"))])
        XCTAssertEqual(session.receive(bytes("{}")), [], "nothing after the end")

        var other = SignalingSession(identity: alice)
        _ = other.receive(bytes(SignalingServerMessage.challenge(challenge).json()))
        let bob = CallIdentityTests.bob().id
        XCTAssertEqual(other.receive(bytes(SignalingServerMessage.registered(id: bob, iceServers: [], iceExpiresAt: 1).json())),
                       [.fail(.protocolViolation("the server registered another ID"))])
        var garbage = SignalingSession(identity: alice)
        XCTAssertEqual(garbage.receive(bytes(#"{"type":"challenge","v":1,"challenge":"\#(challenge)"}"#)),
                       [.fail(.protocolViolation("the server sent a message that is not signaling v2"))])
    }

    func testAnErrorBeforeRegistrationExplainsTheCloseThatFollows() {
        var session = SignalingSession(identity: alice)
        _ = session.receive(bytes(SignalingServerMessage.challenge(challenge).json()))
        XCTAssertEqual(session.receive(bytes(SignalingServerMessage.error(.badSignature).json())), [])
        let failure = session.failure(closeCode: 1008, reason: "bad_signature")
        XCTAssertEqual(failure.code, .badSignature)
        XCTAssertTrue(failure.isFinal, "a refused signature does not get better by retrying")
        XCTAssertFalse(SignalingSession(identity: alice).failure(closeCode: 1013, reason: "unavailable").isFinal)
        XCTAssertFalse(SignalingSession(identity: alice).failure(closeCode: 1008, reason: "duplicate_id").isFinal)
        XCTAssertFalse(SignalingSession(identity: alice).failure(closeCode: 1001, reason: "shutting_down").isFinal)
    }

    func testSignalsForAnotherIDAreDroppedAndOthersPassedOn() {
        var session = registered()
        let bob = CallIdentityTests.bob()
        let call = CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!
        let toAlice = bob.signal(.channel, to: alice.id, call: call, body: "e30=")
        XCTAssertEqual(session.receive(bytes(toAlice.json())), [.signal(toAlice)])
        let toSomeoneElse = bob.signal(.channel, to: CallIdentity().id, call: call, body: "e30=")
        XCTAssertEqual(session.receive(bytes(toSomeoneElse.json())), [])
    }

    func testPresenceAnswersAndRefusalsGoToTheOldestQueryAndSignalRefusalsCarryTheirCall() throws {
        var session = registered()
        let bob = CallIdentityTests.bob().id
        XCTAssertEqual(session.presence([bob]), #"{"type":"presence","v":2,"ids":["\#(bob.canonical)"]}"#)
        _ = session.presence([bob])
        XCTAssertEqual(session.receive(bytes(SignalingServerMessage.presence([(bob, true)]).json())), [.presence([(bob, true)])])
        let limited = SignalingRefusal(code: "rate_limited", message: "too many messages; slow down", call: nil, kind: nil)
        XCTAssertEqual(session.receive(bytes(SignalingServerMessage.error(.rateLimited).json())), [.presenceRefused(limited)])
        XCTAssertEqual(session.receive(bytes(SignalingServerMessage.presence([(bob, true)]).json())), [], "an answer nobody asked for")

        let call = CallUUID.random()
        let offline = SignalingServerMessage.error(.offline, call: call, kind: .offer)
        XCTAssertEqual(session.receive(bytes(offline.json())),
                       [.signalRefused(SignalingRefusal(code: "offline", message: "recipient is not online", call: call, kind: .offer))])
        var fresh = SignalingSession(identity: alice)
        XCTAssertNil(fresh.presence([bob]), "not before registration")
    }
}
