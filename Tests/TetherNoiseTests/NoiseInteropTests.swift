import TetherCrypto
import TetherNoise
import TetherTestSupport
import XCTest

/// Tether against the PyPI `noiseprotocol` package, a Noise implementation it shares no code with.
final class NoiseInteropTests: XCTestCase {
    private let message = UInt8(ascii: "M"), hashRecord = UInt8(ascii: "H")

    private func run(_ name: String, tetherRole: NoiseRole) throws {
        let p = try NoiseProtocol(name: name)
        let tetherStatic = X25519.PrivateKey(), peerStatic = X25519.PrivateKey()
        let prologue = Array("iterm2-companion/v1/pid:0123456789abcdef".utf8)
        let tetherIsInitiator = tetherRole == .initiator
        let (initiatorPattern, responderPattern) = (p.pattern.initiatorPreMessage, p.pattern.responderPreMessage)
        // Which static keys each side knows in advance, from the pattern's pre-messages.
        let tetherKnowsPeer = tetherIsInitiator ? responderPattern.contains(.s) : initiatorPattern.contains(.s)
        let peerKnowsTether = tetherIsInitiator ? initiatorPattern.contains(.s) : responderPattern.contains(.s)
        let usesStatic = p.pattern.initiatorNeedsStaticForTests || p.pattern.responderNeedsStaticForTests

        var arguments = ["--protocol", name, "--role", tetherIsInitiator ? "responder" : "initiator", "--prologue", hexString(prologue)]
        if usesStatic { arguments += ["--static", hexString(peerStatic.rawRepresentation)] }
        if peerKnowsTether { arguments += ["--remote-static", hexString(tetherStatic.publicKey.rawRepresentation)] }
        let peer = try PythonPeer(script: "noise_peer.py", arguments: arguments)

        var handshake = try HandshakeState(p, role: tetherRole, prologue: prologue, staticKey: usesStatic ? tetherStatic : nil,
                                           remoteStaticKey: tetherKnowsPeer ? peerStatic.publicKey : nil)
        var index = 0
        while !handshake.isComplete {
            if handshake.isMyTurn {
                try peer.send(kind: message, try handshake.writeMessage(payload: Array("swift-handshake-\(index)".utf8)))
            } else {
                let record = try peer.receive()
                XCTAssertEqual(record.kind, message)
                XCTAssertEqual(try handshake.readMessage(record.body), Array("py-handshake-\(index)".utf8))
            }
            index += 1
        }
        let peerHash = try peer.receive()
        XCTAssertEqual(peerHash.kind, hashRecord)
        XCTAssertEqual(peerHash.body, handshake.handshakeHash, "\(name): both ends share the handshake hash")
        var transport = try handshake.transportChannel()
        if usesStatic { XCTAssertEqual(transport.remoteStaticKey, peerStatic.publicKey) }

        if tetherIsInitiator {
            // The Python responder speaks first after the handshake.
            XCTAssertEqual(try transport.decrypt(try peer.receive().body), Array("hello from python".utf8))
        }
        for round in 0..<5 {
            let text = Array("round \(round) ".utf8) + [UInt8](repeating: UInt8(round), count: round * 1000)
            try peer.send(kind: message, try transport.encrypt(text))
            let echoed = try transport.decrypt(try peer.receive().body)
            XCTAssertTrue(echoed == Array("echo:".utf8) + text, "\(name) round \(round): echo differs (\(echoed.count) bytes)")
        }
        XCTAssertEqual(peer.finish(), 0, peer.stderrText())
    }

    func testXKBLAKE2sWithTetherAsInitiatorAndAsResponder() throws {
        try run("Noise_XK_25519_ChaChaPoly_BLAKE2s", tetherRole: .initiator)
        try run("Noise_XK_25519_ChaChaPoly_BLAKE2s", tetherRole: .responder)
    }

    func testKKSHA256WithTetherAsInitiatorAndAsResponder() throws {
        try run("Noise_KK_25519_ChaChaPoly_SHA256", tetherRole: .initiator)
        try run("Noise_KK_25519_ChaChaPoly_SHA256", tetherRole: .responder)
    }

    func testNNSHA256WithTetherAsInitiatorAndAsResponder() throws {
        try run("Noise_NN_25519_ChaChaPoly_SHA256", tetherRole: .initiator)
        try run("Noise_NN_25519_ChaChaPoly_SHA256", tetherRole: .responder)
    }

    func testAESGCMAndIKAlsoInteroperate() throws {
        try run("Noise_IK_25519_AESGCM_SHA256", tetherRole: .initiator)
        try run("Noise_XX_25519_AESGCM_BLAKE2b", tetherRole: .responder)
    }
}
