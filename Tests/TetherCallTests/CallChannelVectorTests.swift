@_spi(NoiseTesting) import TetherCall
import TetherCrypto
@_spi(NoiseTesting) import TetherNoise
import TetherTestSupport
import TetherWire
import TetherSync
import XCTest

/// Every secure-channel value of signaling.md §12, byte for byte.
final class CallChannelVectorTests: XCTestCase {
    private let kkPrologue = "63727970746578742e6368616e6e656c2e76320a36663163326238612d336434652d346635302d396136312d3762386339643065316632300a424337434243423536333633373546413144383234333444343636373234443932333737463533423938303639354444343944323644304345313232303541350a34373231423542363332323732453635413638444441374143323542343138354638423031393136444231383543313432383744423932453242373730464145"
    private let frame1 = "015fc2f8a124437afcee7d4567fe31e02c2d042939de96f07b06e28c0c4c3af7406ca02a1d1fa79235230bda21ff7dd607"
    private let frame2 = "011984e5f45500244a4d4b07a3db3e181e5afcb828c0bdb147239666e16906833af061f15c91c0bac5d5c78e63cb07e82b"
    private let sessionID = "f01b402eab1631d2990c23d632b7c286144113bb12049d873f2df396f0696cb7"
    private let aliceReady = "021b3ffbcc0fea0b54540b4f1f9b6cb2fc770731974a8fa29068ee90e92ab1220742e9b6d0504a4e3bd9"
    private let bobReady = "02c99481fdddcbddd6557b43860a506a05b392fca9995ddcfee98b5007cc67dab9455b7bf5767e3398f9"
    private let nnPrologue = "63727970746578742e726f746174652e76320a663031623430326561623136333164323939306332336436333262376332383631343431313362623132303439643837336632646633393666303639366362370a424337434243423536333633373546413144383234333444343636373234443932333737463533423938303639354444343944323644304345313232303541350a343732314235423633323237324536354136384444413741433235423431383546384230313931364442313835433134323837444239324532423737304641450a31"
    private let nnMessage1 = "d6a2527c018dfce085a4a50ad66e0010dd3413be94cbb0a75233299a6afe1800"
    private let nnMessage2 = "472a870bb4b0106f9ae3d0b4b0dcbd55b1cf48214083882e78dba2680ea93250a9763a3865f72fe6f09ff94c9a7980e9"
    private let rotateInit = "023a5205c39b6018d25c674c6b93a809eb1f8453d6e1061f99941c64eaeb6f4c63ceb55a485820a6d221c0f8a15bed3c784c"
    private let rotateResp = "020e2bf1b0108d7802bab9c85681cdb40163a4110a93d401d5aca4c5079483434042a5f08b7e33fc1f33eba02202b94d3be348cc9524e8a833bdb6b2dfdd8fc0feda"
    private let nnHash = "1c3245068a9e3d0298e89d4420a1de5239d9ecaf5c9fd28f290070f44deba235"
    private let aliceToBobEpoch1 = "25634b67c400539eaa9a4223ad4f990be1951061ce293073af36d897e87650a1"
    private let bobToAliceEpoch1 = "4706996e40b4066757ae2121ae97e83d02f85be7c31122a4079c7b45c6196881"
    private let firstEpoch1Frame = "0293e0d04497f8fff0dcad765303c35e075c3c86395c46684bffb3a426c608a8ceb38bd5a2d403f9030e43ab56ccbd1cf95b5e111c813a0c2bfc4636f3820640b59bf13ee2e687d0f6899c3ec84c71b6a0b441aa5f4cef4d039220e6a2bb23428ef17ec0bc05b13019efbdc963fbdaaabcfe77cc91"
    private let safetyNumber = "87123 91341 61965 52377 79898 65120 99612 99002 60117 21426 28131 82440"

    func testBothProloguesAreTheVectorBytes() throws {
        let kk = CallSecureChannel.prologue(callID: Fixture.callID, initiator: Fixture.alice, responder: Fixture.bob)
        XCTAssertEqual(kk.count, 186)
        XCTAssertEqual(hexString(kk), kkPrologue)
        let nn = CallSecureChannel.rotationPrologue(sessionID: try hexBytes(sessionID), initiator: Fixture.alice,
                                                    responder: Fixture.bob, epoch: 1)
        XCTAssertEqual(nn.count, 215)
        XCTAssertEqual(hexString(nn), nnPrologue)
    }

    func testTheChannelReproducesEveryFrameOfTheHandshakeConfirmationAndFirstRotation() throws {
        let now = Fixture.start
        var alice = CallSecureChannel(testingWithHandshakeEphemeral: Fixture.key(0xA3), rotationEphemerals: [Fixture.key(0xA4)],
                                      role: .initiator, callID: Fixture.callID, localID: Fixture.alice, remoteID: Fixture.bob,
                                      localAgreementKey: Fixture.aliceKey, remoteAgreementKey: Fixture.bobKey.publicKey, now: now)
        var bob = CallSecureChannel(testingWithHandshakeEphemeral: Fixture.key(0xB3), rotationEphemerals: [Fixture.key(0xB4)],
                                    role: .responder, callID: Fixture.callID, localID: Fixture.bob, remoteID: Fixture.alice,
                                    localAgreementKey: Fixture.bobKey, remoteAgreementKey: Fixture.aliceKey.publicKey, now: now)

        let first = alice.start(now: now)
        XCTAssertEqual(first.frames.map(hexString), [frame1])

        let answer = bob.receive(first.frames[0], now: now)
        XCTAssertEqual(answer.frames.map(hexString), [frame2, bobReady], "message 2, then Bob's confirmation at nonce 0")
        XCTAssertEqual(bob.sessionID.map(hexString), sessionID)

        let confirmation = alice.receive(answer.frames[0], now: now)
        XCTAssertEqual(confirmation.frames.map(hexString), [aliceReady])
        XCTAssertEqual(alice.sessionID.map(hexString), sessionID)
        XCTAssertFalse(alice.isAuthenticated, "not before Bob's confirmation")

        XCTAssertEqual(alice.receive(answer.frames[1], now: now), [.authenticated(safetyNumber: safetyNumber)])
        XCTAssertEqual(bob.receive(confirmation.frames[0], now: now), [.authenticated(safetyNumber: safetyNumber)])

        let request = try alice.rotate(now: now)
        XCTAssertEqual(request.frames.map(hexString), [rotateInit])
        let hi = MessageID("0b7e2c1a-9f3d-4e5b-8c6a-1d2e3f405162")!
        XCTAssertEqual(try alice.sendText("hi", id: hi, sentAt: 1_700_000_000_000, now: now), [], "held until ROTATE_RESP")

        let response = bob.receive(request.frames[0], now: now)
        XCTAssertEqual(response.frames.map(hexString), [rotateResp])
        XCTAssertTrue(response.contains(.rotated(epoch: 1)))
        XCTAssertEqual(bob.testingTransportKeys.map { hexString($0.sending) }, bobToAliceEpoch1)
        XCTAssertEqual(bob.testingTransportKeys.map { hexString($0.receiving) }, aliceToBobEpoch1)

        let switched = alice.receive(response.frames[0], now: now)
        XCTAssertTrue(switched.contains(.rotated(epoch: 1)))
        XCTAssertEqual(alice.epoch, 1)
        XCTAssertEqual(alice.testingTransportKeys.map { hexString($0.sending) }, aliceToBobEpoch1)
        XCTAssertEqual(alice.testingTransportKeys.map { hexString($0.receiving) }, bobToAliceEpoch1)
        XCTAssertEqual(switched.frames.map(hexString), [firstEpoch1Frame], "the held text, first under epoch 1")
        XCTAssertEqual(switched.frames.first?.count, 117)

        let delivered = bob.receive(switched.frames[0], now: now)
        XCTAssertEqual(delivered.deliveries, [.text(id: hi, text: "hi", sentAt: 1_700_000_000_000)])
    }

    /// The NN messages and hash straight from TetherNoise with the vector's prologue, so the
    /// rotation's inner messages are checked apart from their transport framing.
    func testTheRotationHandshakeReproducesTheNNMessagesHashAndKeys() throws {
        let nn = try NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256")
        let prologue = try hexBytes(nnPrologue)
        var initiator = try HandshakeState(testingWithFixedEphemeralKey: Fixture.key(0xA4), nn, role: .initiator, prologue: prologue)
        var responder = try HandshakeState(testingWithFixedEphemeralKey: Fixture.key(0xB4), nn, role: .responder, prologue: prologue)
        let message1 = try initiator.writeMessage()
        XCTAssertEqual(hexString(message1), nnMessage1)
        XCTAssertEqual(try responder.readMessage(message1), [])
        let message2 = try responder.writeMessage()
        XCTAssertEqual(hexString(message2), nnMessage2)
        XCTAssertEqual(try initiator.readMessage(message2), [])
        XCTAssertEqual(hexString(initiator.handshakeHash), nnHash)
        XCTAssertEqual(hexString(responder.handshakeHash), nnHash)
        let keys = try initiator.transportChannel()
        XCTAssertEqual(keys.sending?.testingKey.map(hexString), aliceToBobEpoch1)
        XCTAssertEqual(keys.receiving?.testingKey.map(hexString), bobToAliceEpoch1)
    }

    /// §12's standard KK vector (swift-noise's KK.swift, empty prologue) through TetherNoise.
    func testTheStandardKKVectorThroughTetherNoise() throws {
        let kk = try NoiseProtocol(name: "Noise_KK_25519_ChaChaPoly_SHA256")
        let initStatic = try X25519.PrivateKey(rawRepresentation: try hexBytes("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"))
        let respStatic = try X25519.PrivateKey(rawRepresentation: try hexBytes("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"))
        let initEphemeral = try X25519.PrivateKey(rawRepresentation: try hexBytes("202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"))
        let respEphemeral = try X25519.PrivateKey(rawRepresentation: try hexBytes("4142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60"))
        var initiator = try HandshakeState(testingWithFixedEphemeralKey: initEphemeral, kk, role: .initiator,
                                           staticKey: initStatic, remoteStaticKey: respStatic.publicKey)
        var responder = try HandshakeState(testingWithFixedEphemeralKey: respEphemeral, kk, role: .responder,
                                           staticKey: respStatic, remoteStaticKey: initStatic.publicKey)
        let message1 = try initiator.writeMessage()
        XCTAssertEqual(hexString(message1), "358072d6365880d1aeea329adf9121383851ed21a28e3b75e965d0d2cd166254de3641cda8802b636ee7afe370f7e34e")
        XCTAssertEqual(try responder.readMessage(message1), [])
        let message2 = try responder.writeMessage()
        XCTAssertEqual(hexString(message2), "64b101b1d0be5a8704bd078f9895001fc03e8e9f9522f188dd128d9846d48466e4c15cda24dee01c5c60ef6c4d6b92b3")
        XCTAssertEqual(try initiator.readMessage(message2), [])
        XCTAssertEqual(hexString(initiator.handshakeHash), "ab6b7582875f29ed276aa03f10ab516e0bd1e21ac7b4c004caad16f614373e2c")
        var initiatorKeys = try initiator.transportChannel(), responderKeys = try responder.transportChannel()
        let message3 = try initiatorKeys.encrypt(try hexBytes("79656c6c6f777375626d6172696e65"))
        XCTAssertEqual(hexString(message3), "ab44bf778165ad086eaebbb994df826628b3fe26ad310642480a1b2af8fc23")
        XCTAssertEqual(hexString(try responderKeys.decrypt(message3)), "79656c6c6f777375626d6172696e65")
        let message4 = try responderKeys.encrypt(try hexBytes("7375626d6172696e6579656c6c6f77"))
        XCTAssertEqual(hexString(message4), "baacf816b83aaeb15954621113f8e0603cb79168fe6308b87413004beee4d2")
        XCTAssertEqual(hexString(try initiatorKeys.decrypt(message4)), "7375626d6172696e6579656c6c6f77")
    }
}
