import TetherCall
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

/// The six bodies of signaling.md §7.1 with §13.1's settled points: deterministic bytes, strict
/// reading, the §12 vectors.
final class CallSignalBodyTests: XCTestCase {
    private let aliceKey = "PFxs4t2Z4Q0sPeBddzqhXj5tlx7U5BOJyTtLvdoXchI="
    private let aliceSig = "+iHvQBv1lRcBf3NP7Ikc6XP6rk4WIPi0CI4EQYLbKLUnF+Q1Mcfgg2bOcpOJ96MniQqfJUOJrmSHtlLv9gIzBA=="

    private func parse(_ kind: SignalKind, _ json: String) -> CallSignalBody? {
        CallSignalBody.parse(kind: kind, json: Array(json.utf8))
    }

    private func offer(_ fields: String) -> String {
        #"{"sdp":"v=0\r\n","agreementKey":"\#(aliceKey)","identitySig":"\#(aliceSig)"\#(fields)}"#
    }

    func testTheOfferBodyEncodesToTheVectorBytesAndItsSignalToTheVectorSignature() throws {
        let alice = CallIdentityTests.alice(), bob = CallIdentityTests.bob()
        let body = CallSignalBody.offer(.init(sdp: "v=0\r\n", agreementKey: alice.agreementPublicKey, identitySignature: alice.identitySignature))
        XCTAssertEqual(String(decoding: body.encoded, as: UTF8.self),
                       #"{"agreementKey":"\#(aliceKey)","identitySig":"\#(aliceSig)","sdp":"v=0\r\n"}"#)
        XCTAssertEqual(body.base64,
                       "eyJhZ3JlZW1lbnRLZXkiOiJQRnhzNHQyWjRRMHNQZUJkZHpxaFhqNXRseDdVNUJPSnlUdEx2ZG9YY2hJPSIsImlkZW50aXR5U2lnIjoiK2lIdlFCdjFsUmNCZjNOUDdJa2M2WFA2cms0V0lQaTBDSTRFUVlMYktMVW5GK1ExTWNmZ2cyYk9jcE9KOTZNbmlRcWZKVU9Kcm1TSHRsTHY5Z0l6QkE9PSIsInNkcCI6InY9MFxyXG4ifQ==")
        let signal = alice.signal(.offer, to: bob.id, call: Fixture.callID, body: body.base64)
        XCTAssertEqual(Base64.encode(signal.signature),
                       "4sLYBtP/C3BY/KUW5/js8vQvePXt3CDl7piEeI/iKTiop6hKzPEAj1eu98zq8bGrJrKOVHdyxPMxZF9QMWGSDQ==")
        XCTAssertEqual(CallSignalBody.parse(signal), body)
    }

    func testTheChannelBodyIsE30AndAnyObjectIsReadiness() {
        XCTAssertEqual(CallSignalBody.channel.base64, "e30=")
        XCTAssertEqual(parse(.channel, "{}"), .channel)
        XCTAssertEqual(parse(.channel, #"{"ready":true,"n":1.5}"#), .channel)
        XCTAssertNil(parse(.channel, "[]"))
        XCTAssertNil(parse(.channel, #"{"a":1,"a":2}"#))
    }

    func testEveryBodyReadsBackAsItWasWritten() {
        let description = CallSignalBody.Description(sdp: "v=0\r\no=- \"q\" é\r\n", agreementKey: [UInt8](repeating: 7, count: 32),
                                                     identitySignature: [UInt8](repeating: 9, count: 64))
        let bodies: [CallSignalBody] = [
            .offer(description), .answer(description), .channel,
            .candidate(CallCandidate(candidate: "candidate:1 1 udp 2122252543 192.0.2.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)),
            .candidate(CallCandidate(candidate: "candidate:2 1 udp 1 192.0.2.2 5001 typ host", sdpMid: nil, sdpMLineIndex: 3)),
            .candidate(.endOfCandidates(sdpMid: "data", sdpMLineIndex: nil)),
        ] + CallSignalBody.RejectReason.allCases.map(CallSignalBody.reject) + CallSignalBody.CloseReason.allCases.map(CallSignalBody.close)
        for body in bodies {
            XCTAssertEqual(CallSignalBody.parse(kind: body.kind, json: body.encoded), body, String(decoding: body.encoded, as: UTF8.self))
        }
        XCTAssertEqual(String(decoding: CallSignalBody.candidate(.endOfCandidates(sdpMid: "0", sdpMLineIndex: 0)).encoded, as: UTF8.self),
                       #"{"candidate":"","sdpMLineIndex":0,"sdpMid":"0"}"#)
        XCTAssertEqual(String(decoding: CallSignalBody.close(.hangup).encoded, as: UTF8.self), #"{"reason":"hangup"}"#)
    }

    func testOfferAndAnswerNeedAnSdpStringAndCanonicalKeyAndSignatureOfTheirSizes() {
        XCTAssertNotNil(parse(.offer, offer("")))
        XCTAssertNotNil(parse(.answer, offer(#","extra":[1,2.5,{"x":null}]"#)), "unknown fields are ignored")
        XCTAssertNil(parse(.offer, #"{"agreementKey":"\#(aliceKey)","identitySig":"\#(aliceSig)"}"#), "no sdp")
        XCTAssertNil(parse(.offer, #"{"sdp":5,"agreementKey":"\#(aliceKey)","identitySig":"\#(aliceSig)"}"#))
        XCTAssertNil(parse(.offer, #"{"sdp":"v=0","identitySig":"\#(aliceSig)"}"#), "no key")
        XCTAssertNil(parse(.offer, #"{"sdp":"v=0","agreementKey":"\#(Base64.encode([UInt8](repeating: 1, count: 31)))","identitySig":"\#(aliceSig)"}"#))
        XCTAssertNil(parse(.offer, #"{"sdp":"v=0","agreementKey":"\#(aliceKey)","identitySig":"\#(Base64.encode([UInt8](repeating: 1, count: 63)))"}"#))
        let urlSafe = aliceSig.replacingOccurrences(of: "+", with: "-")
        XCTAssertNil(parse(.offer, #"{"sdp":"v=0","agreementKey":"\#(aliceKey)","identitySig":"\#(urlSafe)"}"#), "base64url is not b64std")
        // "PFxs…chI=" with non-zero pad bits ("chJ=") decodes to the same bytes but is not canonical.
        let padBits = aliceKey.replacingOccurrences(of: "chI=", with: "chJ=")
        XCTAssertNil(parse(.offer, #"{"sdp":"v=0","agreementKey":"\#(padBits)","identitySig":"\#(aliceSig)"}"#))
        XCTAssertNil(parse(.offer, offer(#","sdp":"again""#)), "a duplicate key")
        XCTAssertNil(parse(.offer, offer(#","x":{"k":1,"k":2}"#)), "a duplicate key in an ignored field")
    }

    func testACandidateNeedsBothLocatorsPresentAndNotBothNull() {
        XCTAssertEqual(parse(.candidate, #"{"candidate":"c","sdpMid":null,"sdpMLineIndex":2}"#),
                       .candidate(CallCandidate(candidate: "c", sdpMid: nil, sdpMLineIndex: 2)))
        XCTAssertEqual(parse(.candidate, #"{"candidate":"c","sdpMid":"0","sdpMLineIndex":null}"#),
                       .candidate(CallCandidate(candidate: "c", sdpMid: "0", sdpMLineIndex: nil)))
        XCTAssertNil(parse(.candidate, #"{"candidate":"c","sdpMid":null,"sdpMLineIndex":null}"#), "both null")
        XCTAssertNil(parse(.candidate, #"{"candidate":"c","sdpMid":"0"}"#), "sdpMLineIndex absent")
        XCTAssertNil(parse(.candidate, #"{"candidate":"c","sdpMLineIndex":0}"#), "sdpMid absent")
        XCTAssertNil(parse(.candidate, #"{"sdpMid":"0","sdpMLineIndex":0}"#), "candidate absent")
        XCTAssertNil(parse(.candidate, #"{"candidate":null,"sdpMid":"0","sdpMLineIndex":0}"#))
        for index in ["1.0", "1e0", "\"0\"", "-1", "true", "9007199254740993"] {
            XCTAssertNil(parse(.candidate, #"{"candidate":"c","sdpMid":"0","sdpMLineIndex":\#(index)}"#), index)
        }
        XCTAssertNil(parse(.candidate, #"{"candidate":"c","sdpMid":0,"sdpMLineIndex":0}"#), "sdpMid is a string")
    }

    func testAnEmptyCandidateStringIsTheEndOfCandidates() throws {
        let body = try XCTUnwrap(parse(.candidate, #"{"candidate":"","sdpMid":"0","sdpMLineIndex":0}"#))
        guard case let .candidate(candidate) = body else { return XCTFail("\(body)") }
        XCTAssertTrue(candidate.isEndOfCandidates)
        XCTAssertEqual(candidate, .endOfCandidates(sdpMid: "0", sdpMLineIndex: 0))
    }

    func testRejectAndCloseTakeOnlyTheirThreeReasons() {
        XCTAssertEqual(parse(.reject, #"{"reason":"busy","note":"x"}"#), .reject(.busy))
        XCTAssertEqual(parse(.close, #"{"reason":"timeout"}"#), .close(.timeout))
        XCTAssertNil(parse(.reject, #"{"reason":"hangup"}"#), "a close reason is no reject reason")
        XCTAssertNil(parse(.close, #"{"reason":"declined"}"#))
        XCTAssertNil(parse(.close, #"{"reason":"Hangup"}"#))
        XCTAssertNil(parse(.close, "{}"))
        XCTAssertNil(parse(.reject, #"{"reason":"busy","reason":"busy"}"#))
    }

    func testAnythingButOneJSONObjectOfAtMost32768BytesIsNoBody() {
        XCTAssertNil(parse(.close, #"{"reason":"hangup"} x"#))
        XCTAssertNil(parse(.close, "\"hangup\""))
        XCTAssertNil(CallSignalBody.parse(kind: .close, json: [0x7B, 0xFF, 0x7D]), "not UTF-8")
        let padding = String(repeating: " ", count: SignalMessage.maxBodyBytes - 7)
        XCTAssertEqual(parse(.channel, "{\"p\":\"" + padding + "\"}"), nil, "32,769 bytes")
        XCTAssertEqual(parse(.channel, "{\"p\":\"" + padding.dropLast() + "\"}"), .channel, "32,768 bytes")
        let alice = CallIdentityTests.alice()
        let notBase64 = SignalMessage(kind: .channel, from: alice.id, to: Fixture.bob, call: Fixture.callID, body: "e30", signature: [])
        XCTAssertNil(CallSignalBody.parse(notBase64))
    }
}
