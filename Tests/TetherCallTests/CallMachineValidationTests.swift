import TetherCall
import TetherCrypto
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

/// §7.2: a forwarded signal that fails any check is dropped without effect.
final class CallMachineValidationTests: XCTestCase {
    private let otherCall = CallUUID("0a0a0a0a-0000-4000-8000-00000000000a")!

    /// Alice's offer left and Bob is invited; returns the pair for Alice to be fed answers.
    private func ringing() -> CallMachinePair {
        let pair = CallMachinePair()
        pair.ring()
        pair.clearRecords()
        return pair
    }

    private func assertDropped(_ signal: SignalMessage, on side: CallMachinePair.Side, in pair: CallMachinePair, as reason: CallSignalDrop,
                               file: StaticString = #filePath, line: UInt = #line) {
        let before = pair.machine(side).call
        let count = pair.machine(side).droppedSignals[reason, default: 0]
        XCTAssertEqual(pair.handle(.signal(signal), on: side), [], file: file, line: line)
        XCTAssertEqual(pair.machine(side).lastDroppedSignal, reason, file: file, line: line)
        XCTAssertEqual(pair.machine(side).droppedSignals[reason], count + 1, file: file, line: line)
        XCTAssertEqual(pair.machine(side).call, before, file: file, line: line)
    }

    private func answer(from identity: CallIdentity, to: SignalingID = Fixture.alice, call: CallUUID = Fixture.callID) -> SignalMessage {
        identity.signal(.answer(identity.description()), to: to, call: call)
    }

    func testAnAnswerWithABadSignatureIsDropped() {
        let pair = ringing()
        let good = answer(from: pair.bob.identity)
        var signature = good.signature
        signature[0] ^= 0x80
        assertDropped(SignalMessage(kind: .answer, from: good.from, to: good.to, call: good.call, body: good.body, signature: signature),
                      on: .alice, in: pair, as: .badSignature)
        // Signed, but the kind changed on the way.
        assertDropped(SignalMessage(kind: .offer, from: good.from, to: good.to, call: good.call, body: good.body, signature: good.signature),
                      on: .alice, in: pair, as: .badSignature)
    }

    func testASignalForAnotherRecipientIsDropped() {
        let pair = ringing()
        assertDropped(answer(from: pair.bob.identity, to: CallMachinePair.carol.id), on: .alice, in: pair, as: .notAddressedHere)
    }

    func testASignalForAnotherCallOrFromAnotherPeerIsDropped() {
        let pair = ringing()
        assertDropped(answer(from: pair.bob.identity, call: otherCall), on: .alice, in: pair, as: .notCurrentCall)
        assertDropped(answer(from: CallMachinePair.carol), on: .alice, in: pair, as: .notCurrentCall)
        let carol = CallMachinePair.carol
        assertDropped(carol.signal(.close(.hangup), to: Fixture.alice), on: .alice, in: pair, as: .notCurrentCall)
        assertDropped(carol.signal(.reject(.busy), to: Fixture.bob), on: .bob, in: pair, as: .notCurrentCall)
    }

    func testAnAnswerWhoseIdentitySignatureFailsIsDropped() {
        let pair = ringing()
        let bob = pair.bob.identity
        // Carol's signed key presented by Bob; Bob's key with Carol's signature; one flipped bit.
        var flipped = bob.identitySignature
        flipped[5] ^= 1
        let carol = CallMachinePair.carol
        for description in [carol.description(),
                            CallSignalBody.Description(sdp: "v=0\r\n", agreementKey: bob.agreementPublicKey, identitySignature: carol.identitySignature),
                            CallSignalBody.Description(sdp: "v=0\r\n", agreementKey: bob.agreementPublicKey, identitySignature: flipped)] {
            assertDropped(bob.signal(.answer(description), to: Fixture.alice), on: .alice, in: pair, as: .badAgreementKey)
        }
    }

    func testALowOrderOrZeroAgreementKeyIsDroppedEvenWhenBobSignedIt() throws {
        let pair = ringing()
        let bob = pair.bob.identity
        for key in [[UInt8](repeating: 0, count: 32), try Hex.decode("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")] {
            let signed = CallSignalBody.Description(sdp: "v=0\r\n", agreementKey: key,
                                                    identitySignature: bob.sign(SignalingTranscript.identityBinding(agreementKey: key)))
            assertDropped(bob.signal(.answer(signed), to: Fixture.alice), on: .alice, in: pair, as: .badAgreementKey)
            // The same for an offer: no invitation, no busy answer.
            let alice = pair.alice.identity
            let offer = CallSignalBody.Description(sdp: "v=0\r\n", agreementKey: key,
                                                   identitySignature: alice.sign(SignalingTranscript.identityBinding(agreementKey: key)))
            assertDropped(alice.signal(.offer(offer), to: Fixture.bob, call: otherCall), on: .bob, in: pair, as: .badAgreementKey)
        }
    }

    func testABodyThatBreaksItsSchemaIsDropped() {
        let pair = ringing()
        let bob = pair.bob.identity
        for json in [#"{"sdp":"v=0"}"#, #"{"reason":"hangup"}"#, "[]"] {
            assertDropped(bob.signal(.answer, to: Fixture.alice, call: Fixture.callID, body: Base64.encode(Array(json.utf8))),
                          on: .alice, in: pair, as: .malformedBody)
        }
        assertDropped(bob.signal(.candidate, to: Fixture.alice, call: Fixture.callID,
                                 body: Base64.encode(Array(#"{"candidate":"c","sdpMid":null,"sdpMLineIndex":null}"#.utf8))),
                      on: .alice, in: pair, as: .malformedBody)
    }

    func testOnlyTheCalleeAnswersOrRejectsAndOnlyOnce() {
        let pair = ringing()
        let alice = pair.alice.identity
        // The caller's answer or reject to the callee means nothing.
        assertDropped(alice.signal(.answer(alice.description()), to: Fixture.bob), on: .bob, in: pair, as: .unexpected)
        assertDropped(alice.signal(.reject(.busy), to: Fixture.bob), on: .bob, in: pair, as: .unexpected)
        assertDropped(alice.signal(.channel, to: Fixture.bob), on: .bob, in: pair, as: .unexpected)
        pair.handle(.accept(call: Fixture.callID), on: .bob)
        pair.pump()
        XCTAssertEqual(pair.alice.call?.phase, .secured)
        assertDropped(answer(from: pair.bob.identity), on: .alice, in: pair, as: .unexpected)
        assertDropped(pair.bob.identity.signal(.reject(.declined), to: Fixture.alice), on: .alice, in: pair, as: .unexpected)
        XCTAssertTrue(pair.chatFlows(from: .bob), "the call is unharmed")
    }

    func testAnAnswerBeforeTheOfferLeftIsDropped() {
        let pair = CallMachinePair()
        pair.handle(.dial(peer: Fixture.bob, call: Fixture.callID), on: .alice)
        assertDropped(answer(from: pair.bob.identity), on: .alice, in: pair, as: .unexpected)
        assertDropped(pair.bob.identity.signal(.reject(.busy), to: Fixture.alice), on: .alice, in: pair, as: .unexpected)
    }

    func testAForgedCloseCannotEndASecuredCall() {
        let pair = CallMachinePair()
        pair.connect()
        let close = pair.bob.identity.signal(.close(.hangup), to: Fixture.alice)
        assertDropped(SignalMessage(kind: .close, from: close.from, to: close.to, call: close.call, body: close.body,
                                    signature: CallMachinePair.carol.sign(close.signedBytes)),
                      on: .alice, in: pair, as: .badSignature)
        assertDropped(CallMachinePair.carol.signal(.close(.hangup), to: Fixture.alice), on: .alice, in: pair, as: .notCurrentCall)
        XCTAssertEqual(pair.alice.call?.phase, .secured)
    }
}
