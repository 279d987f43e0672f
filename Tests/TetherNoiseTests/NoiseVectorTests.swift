@_spi(NoiseTesting) import TetherNoise
import TetherCrypto
import TetherTestSupport
import XCTest

final class NoiseVectorTests: XCTestCase {
    struct Outcome {
        var checked = 0
        var unsupported = 0
        var withHandshakeHash = 0
    }

    private func key(_ vector: [String: Any], _ field: String) throws -> X25519.PrivateKey? {
        guard let hex = vector[field] as? String, !hex.isEmpty else { return nil }
        return try X25519.PrivateKey(rawRepresentation: try hexBytes(hex))
    }

    private func publicKey(_ vector: [String: Any], _ field: String) throws -> X25519.PublicKey? {
        guard let hex = vector[field] as? String, !hex.isEmpty else { return nil }
        return try X25519.PublicKey(rawRepresentation: try hexBytes(hex))
    }

    private func handshake(_ p: NoiseProtocol, _ role: NoiseRole, _ vector: [String: Any], prefix: String) throws -> HandshakeState {
        let prologue = try hexBytes(vector["\(prefix)_prologue"] as? String ?? "")
        let staticKey = try key(vector, "\(prefix)_static")
        let remote = try publicKey(vector, "\(prefix)_remote_static")
        if let ephemeral = try key(vector, "\(prefix)_ephemeral") {
            return try HandshakeState(testingWithFixedEphemeralKey: ephemeral, p, role: role, prologue: prologue, staticKey: staticKey, remoteStaticKey: remote)
        }
        return try HandshakeState(p, role: role, prologue: prologue, staticKey: staticKey, remoteStaticKey: remote)
    }

    /// Replays one vector: every handshake and transport ciphertext, both directions, and the
    /// handshake hash when the vector gives one.
    private func replay(_ vector: [String: Any], file name: String, outcome: inout Outcome) throws {
        let protocolName = (vector["protocol_name"] ?? vector["name"]) as? String ?? ""
        let hasPSK = !((vector["init_psks"] as? [Any])?.isEmpty ?? true) || vector["init_psk"] != nil || vector["resp_psk"] != nil
        // Only names the parser refuses are skipped; a PSK or fallback vector must carry a name
        // that says so, or the skip would hide a case this implementation claims to support.
        guard let p = try? NoiseProtocol(name: protocolName) else {
            outcome.unsupported += 1
            return
        }
        XCTAssertFalse(hasPSK || vector["fallback"] != nil, "\(name): \(protocolName) has PSK or fallback fields")
        XCTAssertEqual(p.name, protocolName)
        var initiator = try handshake(p, .initiator, vector, prefix: "init")
        var responder = try handshake(p, .responder, vector, prefix: "resp")
        var initiatorTransport: NoiseTransport?
        var responderTransport: NoiseTransport?
        let label = "\(name) \(protocolName)"
        for (index, message) in (vector["messages"] as? [[String: Any]] ?? []).enumerated() {
            let payload = try message.hex("payload"), expected = try message.hex("ciphertext")
            let initiatorSends = p.pattern.isOneWay || index % 2 == 0
            if initiatorTransport == nil {
                if initiatorSends {
                    XCTAssertEqual(try initiator.writeMessage(payload: payload), expected, "\(label) message \(index)")
                    XCTAssertEqual(try responder.readMessage(expected), payload, "\(label) message \(index)")
                } else {
                    XCTAssertEqual(try responder.writeMessage(payload: payload), expected, "\(label) message \(index)")
                    XCTAssertEqual(try initiator.readMessage(expected), payload, "\(label) message \(index)")
                }
                if initiator.isComplete {
                    XCTAssertTrue(responder.isComplete, label)
                    initiatorTransport = try initiator.transportChannel()
                    responderTransport = try responder.transportChannel()
                    XCTAssertEqual(initiator.handshakeHash, responder.handshakeHash, label)
                    if let hash = vector["handshake_hash"] as? String {
                        XCTAssertEqual(hexString(initiator.handshakeHash), hash, label)
                        outcome.withHandshakeHash += 1
                    }
                }
            } else if initiatorSends {
                XCTAssertEqual(try initiatorTransport!.encrypt(payload), expected, "\(label) transport \(index)")
                XCTAssertEqual(try responderTransport!.decrypt(expected), payload, "\(label) transport \(index)")
            } else {
                XCTAssertEqual(try responderTransport!.encrypt(payload), expected, "\(label) transport \(index)")
                XCTAssertEqual(try initiatorTransport!.decrypt(expected), payload, "\(label) transport \(index)")
            }
        }
        XCTAssertNotNil(initiatorTransport, "\(label): handshake completed")
        outcome.checked += 1
    }

    private func replayFile(_ name: String) throws -> Outcome {
        let data = try Vectors.data("noise/full/\(name)")
        let object = try JSONSerialization.jsonObject(with: data)
        let vectors = (object as? [String: Any])?["vectors"] as? [[String: Any]] ?? object as? [[String: Any]] ?? []
        var outcome = Outcome()
        for vector in vectors { try replay(vector, file: name, outcome: &outcome) }
        XCTAssertEqual(outcome.checked + outcome.unsupported, vectors.count)
        print("\(name): \(outcome.checked) replayed (\(outcome.withHandshakeHash) with handshake hash), \(outcome.unsupported) unsupported")
        return outcome
    }

    func testCacophonyVectors() throws {
        let outcome = try replayFile("cacophony.txt")
        XCTAssertEqual(outcome.checked, 120)
        XCTAssertEqual(outcome.withHandshakeHash, 120)
    }

    func testSnowVectors() throws {
        // Every 25519 fundamental pattern × {ChaChaPoly, AESGCM} × {SHA256, SHA512, BLAKE2s, BLAKE2b}.
        XCTAssertEqual(try replayFile("snow.txt").checked, 120)
        XCTAssertEqual(try replayFile("snow-extended.txt").checked, 0, "P-256, XChaChaPoly and KEM extensions are not supported")
    }

    func testNoiseCVectors() throws {
        let basic = try replayFile("noise-c-basic.txt")
        XCTAssertEqual(basic.checked, 120)
        XCTAssertEqual(basic.withHandshakeHash, 120)
        XCTAssertEqual(try replayFile("noise-c-cacophony-old.txt").checked, 120)
        XCTAssertEqual(try replayFile("noise-c-fallback.txt").checked, 0, "fallback patterns are not supported")
    }

    func testNoiseprotocolMultiPSKVectorsAreAllUnsupported() throws {
        XCTAssertEqual(try replayFile("noiseprotocol-snow-multipsk.txt").checked, 0)
    }

    func testSelectedExtract() throws {
        let file = try Vectors.json("noise/selected-25519-chachapoly.json")
        var outcome = Outcome()
        for vector in file["vectors"] as? [[String: Any]] ?? [] { try replay(vector, file: "selected", outcome: &outcome) }
        XCTAssertEqual(outcome.checked, 40)
        XCTAssertEqual(outcome.withHandshakeHash, 20)
    }
}
