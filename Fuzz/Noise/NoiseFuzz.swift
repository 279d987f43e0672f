// A Noise responder fed handshake messages, then transport messages through the frame receiver:
// XK as the Mac answers a phone (client.md §9), KK and NN as a call's secure channel answers
// (signaling.md §9).
//
// Input: a settings byte, the prologue (a field), then per message a field and, when an honest
// initiator writes, a corruption of it.
//   [0] the protocol (XK, KK, NN: the byte mod 3); bit 2: an honest initiator of the harness's
//       own writes every message (the input only picks payloads and corruptions), so the
//       transport phase is reached; bits 3-4: the frame cap; bit 5: re-key both directions
//       after the handshake
// Corruption: [op][position, 2 bytes][byte]: op 0 none, 1 XOR at position, 2 truncate there,
// 3 append. Uncorrupted honest messages must be read back exactly; nothing the input makes of
// them may crash or hang.
import TetherCrypto
@_spi(NoiseTesting) import TetherNoise

enum NoiseFuzz {
    static let protocols = [NoiseProtocol.companionXK, try! NoiseProtocol(name: "Noise_KK_25519_ChaChaPoly_SHA256"),
                            try! NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256")]
    static let responderStatic = try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: 0x41, count: 32))
    static let initiatorStatic = try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: 0x42, count: 32))
    static let initiatorEphemeral = try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: 0x43, count: 32))
    static let frameCaps = [0, 100, 65_536, 1 << 20]

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let choice = Int(settings % 3)
        let noise = protocols[choice]
        let honest = settings & 4 != 0
        let frameCap = frameCaps[Int(settings >> 3) & 3]
        let prologue = input.field()
        // XK: the responder has a static key the initiator knows; KK: both know both; NN: none.
        let responderKey = choice == 2 ? nil : responderStatic
        let initiatorKey = choice == 2 ? nil : initiatorStatic
        var responder = try! HandshakeState(noise, role: .responder, prologue: prologue, staticKey: responderKey,
                                            remoteStaticKey: choice == 1 ? initiatorStatic.publicKey : nil)
        var initiator = honest ? try! HandshakeState(testingWithFixedEphemeralKey: initiatorEphemeral, noise, role: .initiator, prologue: prologue,
                                                     staticKey: initiatorKey, remoteStaticKey: responderKey?.publicKey) : nil

        while !responder.isComplete {
            let payload = input.field()
            if responder.isMyTurn {
                guard let message = try? responder.writeMessage(payload: payload) else { return }
                if initiator != nil {
                    expect((try? initiator!.readMessage(message)) == payload, "the initiator could not read the responder")
                }
            } else {
                var message = payload
                var intact = false
                if initiator != nil {
                    message = try! initiator!.writeMessage(payload: payload)
                    intact = corrupt(&message, &input)
                }
                do throws(NoiseError) {
                    let read = try responder.readMessage(message)
                    if intact { expect(read == payload, "a handshake payload changed") }
                    // A corruption the responder took (an unencrypted payload): the two sides
                    // no longer agree, so the harness stops speaking for the initiator.
                    if !intact { initiator = nil }
                } catch {
                    if intact { finding("an honest handshake message refused: \(error)") }
                    // A failed handshake stays failed.
                    expect((try? responder.readMessage(message)) == nil && (try? responder.writeMessage()) == nil, "a failed handshake went on")
                    return
                }
            }
        }
        guard var transport = try? responder.transportChannel(), let receiving = transport.receiving else { finding("no transport after the handshake") }
        if let initiator { expect(responder.handshakeHash == initiator.handshakeHash, "the two sides disagree on the handshake hash") }
        var peer = try? initiator?.transportChannel()
        let rekey = settings & 0x20 != 0
        var receiver = NoiseFrameReceiver(receiving, maxFrameLength: frameCap)
        if rekey { try! receiver.rekey() }
        let sender = peer.map { NoiseFrameSender($0.sending!) }
        if rekey { try! sender?.rekey() }

        // The responder's own direction, read back by the honest initiator.
        if peer != nil, let sealed = try? transport.encrypt(input.field()) { expect((try? peer!.decrypt(sealed)) != nil, "the initiator could not decrypt") }

        for _ in 0..<32 where input.remainingCount > 0 {
            let frame = input.field()
            guard let sender else {
                do { touch(try receiver.receive(frame)) } catch { return }
                continue
            }
            let messages = try! sender.seal(frame)
            var intact = true
            var received: [UInt8]?
            do throws(NoiseError) {
                for var message in messages {
                    intact = corrupt(&message, &input) && intact
                    received = try receiver.receive(message)
                }
            } catch {
                if intact, frame.count <= frameCap { finding("an honest frame refused: \(error)") }
                return
            }
            if intact { expect(frame.count <= frameCap && received == frame, "an honest frame did not come through whole") }
        }
    }

    /// Applies the input's corruption to `message`; true when it left the message as it was.
    static func corrupt(_ message: inout [UInt8], _ input: inout FuzzInput) -> Bool {
        let op = input.byte() % 4
        let position = input.uint16()
        let byte = input.byte()
        switch op {
        case 1 where position < message.count && byte != 0:
            message[position] ^= byte
        case 2 where position < message.count:
            message.removeSubrange(position...)
        case 3:
            message.append(byte)
        default:
            return true
        }
        return false
    }
}

extension NoiseFuzz {
    /// Whole honest conversations in each protocol (payloads, then frames, nothing corrupted),
    /// one with a corrupted first message, and the raw first message of each protocol as the
    /// harness's initiator writes it (fixed keys make it the same every run).
    static var seeds: [String: [UInt8]] {
        let intact: [UInt8] = [0, 0, 0, 0]
        let prologue = field(Array("iterm2-companion/v1/pid:0123456789abcdef".utf8))
        func honest(_ choice: UInt8, rekey: Bool = false, first: [UInt8] = intact) -> [UInt8] {
            var seed = [choice | 4 | 2 << 3 | (rekey ? 0x20 : 0)] + prologue
            // Initiator, responder, initiator (XK); initiator, responder (KK, NN).
            seed += field(Array("first".utf8)) + first + field(Array("second".utf8))
            if choice == 0 { seed += field([]) + intact }
            seed += field(Array("responder says".utf8))
            for frame in [Array("{\"payload\":{\"ping\":{}}}".utf8), [], [UInt8](repeating: 0x01, count: 300)] { seed += field(frame) + intact }
            return seed
        }
        func raw(_ choice: UInt8) -> [UInt8] {
            var initiator = try! HandshakeState(testingWithFixedEphemeralKey: initiatorEphemeral, protocols[Int(choice)], role: .initiator,
                                                prologue: Array("iterm2-companion/v1/pid:0123456789abcdef".utf8),
                                                staticKey: choice == 2 ? nil : initiatorStatic, remoteStaticKey: choice == 2 ? nil : responderStatic.publicKey)
            return [choice] + prologue + field(try! initiator.writeMessage(payload: Array("first".utf8))) + field(Array("second".utf8))
        }
        return [
            "xk": honest(0), "kk": honest(1), "nn": honest(2), "xk-rekey": honest(0, rekey: true),
            "xk-corrupt": honest(0, first: [1, 0, 40, 0x80]), "nn-truncated": honest(2, first: [2, 0, 10, 0]),
            "xk-raw": raw(0), "kk-raw": raw(1), "nn-raw": raw(2),
        ]
    }
}
