import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// signaling.md §2, §3.1, §5 and the §12 vectors, for the messages server and clients share.
final class SignalingWireTests: XCTestCase {
    let alice = SignalingID(canonical: "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")!
    let bob = SignalingID(canonical: "4721B5B632272E65A68DDA7AC25B4185F8B01916DB185C14287DB92E2B770FAE")!

    func testIDsParseAsTypedAndOnlyTheCanonicalFormGoesOnTheWire() throws {
        XCTAssertEqual(try SignalingID.parse(userInput: "  ct2-bc7c-bcb5-6363-75fa-1d82-434d-4667-24d9-2377-f53b-9806-95dd-49d2-6d0c-e122-05a5 \n"), alice)
        XCTAssertEqual(alice.display, "CT2-BC7C-BCB5-6363-75FA-1D82-434D-4667-24D9-2377-F53B-9806-95DD-49D2-6D0C-E122-05A5")
        XCTAssertThrowsError(try SignalingID.parse(userInput: String(repeating: "A", count: 32))) { XCTAssertEqual($0 as? SignalingID.ParseError, .legacy) }
        XCTAssertThrowsError(try SignalingID.parse(userInput: String(repeating: "A", count: 63))) { XCTAssertEqual($0 as? SignalingID.ParseError, .invalid) }
        XCTAssertNil(SignalingID(canonical: alice.canonical.lowercased()))
        XCTAssertNil(SignalingID(canonical: "CT2-" + alice.canonical))
        XCTAssertEqual(SignalingID(key: try Ed25519.PrivateKey(seed: [UInt8](repeating: 0xa1, count: 32)).publicKey.rawRepresentation), alice)
    }

    func testCallUUIDsAreLowercaseCanonicalAndFreshOnesAreVersion4() {
        XCTAssertNotNil(CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20"))
        XCTAssertNil(CallUUID("6F1C2B8A-3D4E-4F50-9A61-7B8C9D0E1F20"))
        XCTAssertNil(CallUUID("6f1c2b8a3d4e4f509a617b8c9d0e1f20"))
        let fresh = CallUUID.random().text
        XCTAssertEqual(Array(fresh)[14], "4")
        XCTAssertTrue("89ab".contains(Array(fresh)[19]))
    }

    func testTheRegistrationVectorVerifies() throws {
        let challenge = Base64.encode([UInt8](0..<32))
        XCTAssertEqual(challenge, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        let transcript = SignalingTranscript.register(challenge: challenge, id: alice)
        XCTAssertEqual(transcript.count, 130)
        let signature = try Base64.decode("vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg==")
        XCTAssertTrue(try Ed25519.PublicKey(rawRepresentation: alice.key).isValidSignature(signature, for: transcript))
        let key = try Ed25519.PrivateKey(seed: [UInt8](repeating: 0xa1, count: 32))
        XCTAssertEqual(key.signature(for: transcript), signature)
    }

    func testTheOfferAndChannelVectorsParseAndVerify() throws {
        let offer = #"{"type":"signal","v":2,"kind":"offer","from":"\#(alice.canonical)","to":"\#(bob.canonical)","call":"6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20","body":"eyJhZ3JlZW1lbnRLZXkiOiJQRnhzNHQyWjRRMHNQZUJkZHpxaFhqNXRseDdVNUJPSnlUdEx2ZG9YY2hJPSIsImlkZW50aXR5U2lnIjoiK2lIdlFCdjFsUmNCZjNOUDdJa2M2WFA2cms0V0lQaTBDSTRFUVlMYktMVW5GK1ExTWNmZ2cyYk9jcE9KOTZNbmlRcWZKVU9Kcm1TSHRsTHY5Z0l6QkE9PSIsInNkcCI6InY9MFxyXG4ifQ==","sig":"4sLYBtP/C3BY/KUW5/js8vQvePXt3CDl7piEeI/iKTiop6hKzPEAj1eu98zq8bGrJrKOVHdyxPMxZF9QMWGSDQ==","extra":1.5}"#
        let (type, fields) = try XCTUnwrap(SignalingClientMessage.classify(Array(offer.utf8)))
        XCTAssertEqual(type, .signal)
        let message = try SignalMessage.parse(fields).get()
        XCTAssertEqual(message.signedBytes.count, 440)
        XCTAssertTrue(try Ed25519.PublicKey(rawRepresentation: alice.key).isValidSignature(message.signature, for: message.signedBytes))
        XCTAssertFalse(message.json().contains("extra"), "unknown fields are not forwarded")
        XCTAssertEqual(SignalingServerMessage.parse(Array(message.json().utf8)), .signal(message))

        let channel = SignalingTranscript.signal(kind: .channel, from: bob, to: alice, call: CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!, body: "e30=")
        let signature = try Base64.decode("ZvDNeMl7trkdBBuMXVUhaHP8WlDhYH5q+WumZ0RsFdO+eimW0JghzyS8NLoa/S4ah9EjE9W7cPADmOoEue9RDA==")
        XCTAssertTrue(try Ed25519.PublicKey(rawRepresentation: bob.key).isValidSignature(signature, for: channel))
    }

    func testStrictJSONRefusesDuplicateKeysAndInexactIntegers() {
        XCTAssertNil(SignalingClientMessage.classify(Array(#"{"type":"presence","type":"presence","v":2}"#.utf8)))
        for v in ["2.0", "2e0", "\"2\"", "true", "9007199254740993"] {
            let (_, fields) = SignalingClientMessage.classify(Array(#"{"type":"presence","v":\#(v),"ids":["\#(alice.canonical)"]}"#.utf8))!
            XCTAssertNil(PresenceQuery.parse(fields), v)
        }
        let (_, fields) = SignalingClientMessage.classify(Array(#"{"type":"presence","v":2,"ids":["\#(alice.canonical)"],"x":2e400}"#.utf8))!
        XCTAssertEqual(PresenceQuery.parse(fields)?.ids, [alice])
        XCTAssertEqual(JSONValue.parseStrict(Array("9007199254740992".utf8)), .number(0x1p53))
    }

    /// ASCII texts are settled a word at a time; a byte that is not ASCII anywhere (in a whole
    /// word or the tail) sends the text through full UTF-8 validation.
    func testJSONTextsMustBeUTF8WhereverTheBadByteSits() {
        for padding in 0..<20 {
            let spaces = [UInt8](repeating: 0x20, count: padding)
            let good = spaces + Array(#"{"k":"é ✓ 🙂"}"#.utf8)
            XCTAssertEqual(JSONValue.parseStrict(good), .object(["k": .string("é ✓ 🙂")]), "padding \(padding)")
            for bad: [UInt8] in [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]] {
                let text = spaces + Array(#"{"k":""#.utf8) + bad + Array(#""}"#.utf8)
                XCTAssertNil(JSONValue.parseStrict(text), "padding \(padding), \(bad)")
                XCTAssertNil(JSONValue.parse(text), "padding \(padding), \(bad)")
            }
        }
    }

    func testBodiesAndSignaturesMustBeCanonicalBase64() {
        func fault(_ body: String, sig: String = Base64.encode([UInt8](repeating: 1, count: 64))) -> String? {
            let text = #"{"type":"signal","v":2,"kind":"channel","from":"\#(alice.canonical)","to":"\#(bob.canonical)","call":"6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20","body":"\#(body)","sig":"\#(sig)"}"#
            guard case let .failure(fault) = SignalMessage.parse(SignalingClientMessage.classify(Array(text.utf8))!.fields) else { return nil }
            XCTAssertEqual(fault.kind, .channel)
            XCTAssertEqual(fault.call?.text, "6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")
            return fault.reason
        }
        XCTAssertNil(fault("e30="))
        XCTAssertNotNil(fault("e31="), "non-zero pad bits")
        XCTAssertNotNil(fault("e30"), "unpadded")
        XCTAssertNotNil(fault(Base64.encode(Array("[]".utf8))), "not an object")
        XCTAssertNotNil(fault(Base64.encode(Array(("{\"a\":\"" + String(repeating: "x", count: 32_761) + "\"}").utf8))), "over 32,768 bytes")
        XCTAssertNotNil(fault("e30=", sig: Base64.encodeURL([UInt8](repeating: 0xff, count: 64))))
    }

    func testServerMessagesRoundTrip() {
        let messages: [SignalingServerMessage] = [
            .challenge("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
            .registered(id: alice, iceServers: [ICEServer(urls: ["stun:s.example"]), ICEServer(urls: ["turn:t.example"], username: "1:ab", credential: "c\"")],
                        iceExpiresAt: 1_700_003_600),
            .presence([(bob, false), (alice, true)]),
            .error(.offline, call: CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20"), kind: .offer),
            .error(.badMessage),
        ]
        for message in messages { XCTAssertEqual(SignalingServerMessage.parse(Array(message.json().utf8)), message, message.json()) }
    }
}
