@_spi(NoiseTesting) import TetherNoise
import Foundation
import TetherCrypto
import TetherTestSupport
import XCTest

/// A completed handshake between two in-memory parties.
struct Pair {
    var initiator: HandshakeState
    var responder: HandshakeState
    var messages: [[UInt8]] = []

    init(_ name: String, prologue: [UInt8] = [], responderPrologue: [UInt8]? = nil,
         initiatorKnowsResponderAs: X25519.PublicKey? = nil) throws {
        let p = try NoiseProtocol(name: name)
        let initiatorStatic = X25519.PrivateKey(), responderStatic = X25519.PrivateKey()
        let initiatorPre = p.pattern.responderPreMessage.contains(.s) ? (initiatorKnowsResponderAs ?? responderStatic.publicKey) : nil
        let responderPre = p.pattern.initiatorPreMessage.contains(.s) ? initiatorStatic.publicKey : nil
        initiator = try HandshakeState(p, role: .initiator, prologue: prologue, staticKey: initiatorStatic, remoteStaticKey: initiatorPre)
        responder = try HandshakeState(p, role: .responder, prologue: responderPrologue ?? prologue, staticKey: responderStatic, remoteStaticKey: responderPre)
    }

    /// Runs the handshake to the end, recording the messages.
    mutating func complete() throws -> (NoiseTransport, NoiseTransport) {
        while !initiator.isComplete {
            if initiator.isMyTurn {
                let m = try initiator.writeMessage(payload: Array("i".utf8))
                messages.append(m)
                _ = try responder.readMessage(m)
            } else {
                let m = try responder.writeMessage(payload: Array("r".utf8))
                messages.append(m)
                _ = try initiator.readMessage(m)
            }
        }
        return (try initiator.transportChannel(), try responder.transportChannel())
    }
}

final class NoiseBehaviourTests: XCTestCase {
    func testProtocolNamesParseAndPrint() throws {
        for name in ["Noise_XK_25519_ChaChaPoly_BLAKE2s", "Noise_KK_25519_ChaChaPoly_SHA256", "Noise_NN_25519_AESGCM_SHA512", "Noise_IK_25519_ChaChaPoly_BLAKE2b"] {
            XCTAssertEqual(try NoiseProtocol(name: name).description, name)
        }
        for bad in ["Noise_XK_448_ChaChaPoly_BLAKE2s", "Noise_XKpsk3_25519_ChaChaPoly_BLAKE2s", "Noise_XK_25519_ChaChaPoly", "noise_XK_25519_ChaChaPoly_BLAKE2s",
                    "Noise_XK_25519_ChaChaPoly_BLAKE2s_", "Noise_ZZ_25519_ChaChaPoly_SHA256", "Noise_XXfallback_25519_AESGCM_SHA256", ""] {
            XCTAssertThrowsError(try NoiseProtocol(name: bad)) { XCTAssertEqual($0 as? NoiseError, .unsupportedProtocol(bad)) }
        }
    }

    func testMissingKeysAndTurnOrderAreErrors() throws {
        let xk = NoiseProtocol.companionXK
        XCTAssertThrowsError(try HandshakeState(xk, role: .initiator, staticKey: X25519.PrivateKey())) {
            XCTAssertEqual($0 as? NoiseError, .missingKey("rs (remote static key)"))
        }
        XCTAssertThrowsError(try HandshakeState(xk, role: .responder)) { XCTAssertEqual($0 as? NoiseError, .missingKey("s (local static key)")) }
        var pair = try Pair("Noise_XK_25519_ChaChaPoly_BLAKE2s")
        XCTAssertThrowsError(try pair.responder.writeMessage()) { XCTAssertEqual($0 as? NoiseError, .outOfTurn) }
        XCTAssertThrowsError(try pair.initiator.transportChannel()) { XCTAssertEqual($0 as? NoiseError, .handshakeIncomplete) }
        _ = try pair.complete()
        XCTAssertThrowsError(try pair.initiator.writeMessage()) { XCTAssertEqual($0 as? NoiseError, .outOfTurn) }
    }

    func testFlippedBitInAnyHandshakeMessageFailsAndPoisons() throws {
        for name in ["Noise_XK_25519_ChaChaPoly_BLAKE2s", "Noise_KK_25519_ChaChaPoly_SHA256", "Noise_IK_25519_AESGCM_SHA256"] {
            var reference = try Pair(name)
            _ = try reference.complete()
            for index in reference.messages.indices {
                for bit in stride(from: 0, to: reference.messages[index].count * 8, by: 7) {
                    // Fresh parties run the handshake up to `index`, whose message arrives with one bit flipped.
                    var pair = try Pair(name)
                    var failed = false
                    for step in 0...index {
                        let (writerIsInitiator) = pair.initiator.isMyTurn
                        var message = writerIsInitiator ? try pair.initiator.writeMessage(payload: Array("i".utf8))
                                                        : try pair.responder.writeMessage(payload: Array("r".utf8))
                        if step == index { message[bit / 8] ^= UInt8(1 << (bit % 8)) }
                        do {
                            if writerIsInitiator { _ = try pair.responder.readMessage(message) } else { _ = try pair.initiator.readMessage(message) }
                        } catch {
                            failed = true
                            let reader = writerIsInitiator ? pair.responder : pair.initiator
                            var poisoned = reader
                            XCTAssertThrowsError(try poisoned.readMessage(message)) { XCTAssertEqual($0 as? NoiseError, .poisoned) }
                        }
                    }
                    XCTAssertTrue(failed, "\(name) message \(index) bit \(bit)")
                }
            }
        }
    }

    func testTransportTamperingReplayAndReorderingFail() throws {
        var pair = try Pair("Noise_XK_25519_ChaChaPoly_BLAKE2s")
        var (initiator, responder) = try pair.complete()
        let m1 = try initiator.encrypt(Array("one".utf8)), m2 = try initiator.encrypt(Array("two".utf8))
        var reordered = responder
        XCTAssertThrowsError(try reordered.decrypt(m2), "reordered")
        var replayed = responder
        XCTAssertEqual(try replayed.decrypt(m1), Array("one".utf8))
        XCTAssertThrowsError(try replayed.decrypt(m1), "replayed") { XCTAssertEqual($0 as? NoiseError, .authenticationFailure) }
        XCTAssertThrowsError(try replayed.decrypt(m2), "poisoned after a failure") { XCTAssertEqual($0 as? NoiseError, .poisoned) }
        for bit in 0..<(m1.count * 8) {
            var tampered = m1
            tampered[bit / 8] ^= UInt8(1 << (bit % 8))
            var copy = responder
            XCTAssertThrowsError(try copy.decrypt(tampered))
        }
        XCTAssertEqual(try responder.decrypt(m1), Array("one".utf8))
        XCTAssertEqual(try responder.decrypt(m2), Array("two".utf8))
        let back = try responder.encrypt(Array("back".utf8))
        XCTAssertEqual(try initiator.decrypt(back), Array("back".utf8))
        XCTAssertEqual(initiator.handshakeHash, responder.handshakeHash)
    }

    func testWrongPrologueOrResponderKeyFailsAtMessageOne() throws {
        var prologue = try Pair("Noise_XK_25519_ChaChaPoly_BLAKE2s", prologue: Array("iterm2-companion/v1/pid:a".utf8),
                                responderPrologue: Array("iterm2-companion/v1/pid:b".utf8))
        let m1 = try prologue.initiator.writeMessage()
        XCTAssertThrowsError(try prologue.responder.readMessage(m1)) { XCTAssertEqual($0 as? NoiseError, .authenticationFailure) }

        var wrongKey = try Pair("Noise_XK_25519_ChaChaPoly_BLAKE2s", initiatorKnowsResponderAs: X25519.PrivateKey().publicKey)
        let w1 = try wrongKey.initiator.writeMessage()
        XCTAssertThrowsError(try wrongKey.responder.readMessage(w1)) { XCTAssertEqual($0 as? NoiseError, .authenticationFailure) }

        // In KK the responder's static key enters at message 1 as well (es, ss).
        var kk = try Pair("Noise_KK_25519_ChaChaPoly_SHA256", initiatorKnowsResponderAs: X25519.PrivateKey().publicKey)
        let k1 = try kk.initiator.writeMessage()
        XCTAssertThrowsError(try kk.responder.readMessage(k1))
    }

    func testNonceExhaustionIsAnErrorNotAWrap() throws {
        var pair = try Pair("Noise_NN_25519_ChaChaPoly_SHA256")
        var (initiator, responder) = try pair.complete()
        initiator.sending!.setNonce(UInt64.max - 1)
        responder.receiving!.setNonce(UInt64.max - 1)
        let last = try initiator.encrypt([1])
        XCTAssertEqual(try responder.decrypt(last), [1])
        XCTAssertThrowsError(try initiator.encrypt([2])) { XCTAssertEqual($0 as? NoiseError, .nonceExhausted) }
        XCTAssertEqual(initiator.sending!.nonce, UInt64.max)
    }

    func testRekeyFollowsTheSpecAndBothSidesMustRekey() throws {
        var pair = try Pair("Noise_NN_25519_ChaChaPoly_SHA256")
        var (initiator, responder) = try pair.complete()
        _ = try responder.decrypt(try initiator.encrypt([0]))
        try initiator.sending!.rekey()
        var lagging = responder
        XCTAssertThrowsError(try lagging.decrypt(try { var copy = initiator; return try copy.encrypt([1]) }()))
        try responder.receiving!.rekey()
        XCTAssertEqual(try responder.decrypt(try initiator.encrypt([1])), [1])
        XCTAssertEqual(initiator.sending!.nonce, 2, "rekey keeps the nonce")

        // k' = first 32 bytes of ENCRYPT(k, 2^64−1, empty, zeros): check with the raw AEAD.
        let key = [UInt8](repeating: 9, count: 32)
        var state = CipherStateProbe.make(key: key)
        try state.rekey()
        var nonce = [UInt8](repeating: 0, count: 4) + [UInt8](repeating: 0xff, count: 8)
        let expected = Array(try AEAD.seal(.chaCha20Poly1305, key: key, nonce: nonce, plaintext: [UInt8](repeating: 0, count: 32)).prefix(32))
        nonce = [UInt8](repeating: 0, count: 12)
        let viaNewKey = try AEAD.seal(.chaCha20Poly1305, key: expected, nonce: nonce, plaintext: [7])
        XCTAssertEqual(try state.encrypt([7]), viaNewKey)
    }

    /// client.md §9.7: the iTerm2 pairing handshake with fixed keys, the SAS input h, and the
    /// first transport frames.
    func testCompanionEndToEndPairingVector() throws {
        func priv(_ hex: String) throws -> X25519.PrivateKey { try X25519.PrivateKey(rawRepresentation: try hexBytes(hex)) }
        let macStatic = try priv("a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf")
        let phoneStatic = try priv("202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f")
        let prologue = try hexBytes("697465726d322d636f6d70616e696f6e2f76312f7069643a30313233343536373839616263646566")
        var phone = try HandshakeState(testingWithFixedEphemeralKey: try priv("404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"),
                                       .companionXK, role: .initiator, prologue: prologue, staticKey: phoneStatic, remoteStaticKey: macStatic.publicKey)
        var mac = try HandshakeState(testingWithFixedEphemeralKey: try priv("c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"),
                                     .companionXK, role: .responder, prologue: prologue, staticKey: macStatic)
        let m1 = try phone.writeMessage()
        XCTAssertEqual(hexString(m1), "79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a7c3c4c6d85051d5a19abd6a80dfcef58")
        XCTAssertEqual(try mac.readMessage(m1), [])
        let m2 = try mac.writeMessage()
        XCTAssertEqual(hexString(m2), "dc2cca31e8e43bbd91dff7e475cca3347eb478107d5bd765aba4ae4a30c35d446a10864122b23835f1ca82d8f1e72a3a")
        XCTAssertEqual(try phone.readMessage(m2), [])
        let m3 = try phone.writeMessage()
        XCTAssertEqual(hexString(m3), "1225a9eafbf135a950b9ed64d51490f474b6dbf8e977c0cb9b18d7254f5309c3429270dd97b0aa67e3ea04f0abbdc4cdacb8d55ee02f3a420a78e67e9e020c24")
        XCTAssertEqual(try mac.readMessage(m3), [])
        XCTAssertEqual(hexString(phone.handshakeHash), "abed9f5c307c4d181a07a70e657287736b38e6591c30c251c6be4b77b48b2444")
        XCTAssertEqual(mac.handshakeHash, phone.handshakeHash)
        XCTAssertEqual(try mac.transportChannel().remoteStaticKey, phoneStatic.publicKey, "the Mac learns the phone's key from message 3")

        let macSender = NoiseFrameSender(try mac.transportChannel().sending!)
        var phoneReceiver = NoiseFrameReceiver(try phone.transportChannel().receiving!, maxFrameLength: 1 << 20)
        let verdict = try macSender.seal(Array(#"{"pairing":"accepted"}"#.utf8))
        XCTAssertEqual(verdict.map(hexString), ["dab564c40601e9c1de2ab4a43946e037b32b75034db468034bb7e85c98635f08d9941445dc713d"])
        XCTAssertEqual(try phoneReceiver.receive(verdict[0]).map { String(decoding: $0, as: UTF8.self) }, #"{"pairing":"accepted"}"#)

        let phoneSender = NoiseFrameSender(try phone.transportChannel().sending!)
        let courier = #"{"requestID":1,"payload":{"relayRoomSecret":{"_0":"WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo="}}}"#
        XCTAssertEqual(try phoneSender.seal(Array(courier.utf8)).map(hexString),
                       ["378d2899ce95ab136052ab4f7840a26a5264979245cc55e378ec19b7a8e3122fc9c4eff4818ec3889c45b22051c2c6dabaca184785a5a2f9b97f2e3c6502dd51cadf8368016f49a80ae2bcbcfd3fc01af78bced12353bb4da327bf7ece431a61e1ee3a68e9d75500e8d0d626cb1ad2d1d9ee3b1e"])
        let ack = #"{"requestID":1,"payload":{"relayRoomSecretStored":{}}}"#
        XCTAssertEqual(try macSender.seal(Array(ack.utf8)).map(hexString),
                       ["164b8bfd1700fce31fcc0f33b35b41a45a223c55606184fc1842a4dc6cfff9a6ec9704a3bab7249f4261115d51aa1dff7b6ea65422d5b2040a0df628ee02dd8e07ed07a6e8f61a"])
    }
}

/// A CipherState keyed directly, for checking Rekey against the raw AEAD.
enum CipherStateProbe {
    static func make(key: [UInt8]) -> CipherState { CipherState(testingWithKey: key, cipher: .chaChaPoly) }
}
