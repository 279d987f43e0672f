@_spi(NoiseTesting) import TetherCall
import TetherNoise
import TetherSync
import XCTest

/// Everything §9.6 and §10 say terminates the channel does, with its own reason, and nothing
/// comes out afterwards.
final class CallChannelFailureTests: XCTestCase {
    private let now = Fixture.start

    /// The channel terminated on `failure` and is closed for good, its keys released.
    private func assertClosed(_ channel: inout CallSecureChannel, by actions: [CallChannelAction], _ failure: CallChannelFailure,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(actions.last, .terminate(failure), file: file, line: line)
        XCTAssertEqual(channel.failure, failure, file: file, line: line)
        XCTAssertNil(channel.testingTransportKeys, "cipher states released", file: file, line: line)
        XCTAssertNil(channel.nextTick, file: file, line: line)
        XCTAssertEqual(channel.pacedFrameCount, 0, file: file, line: line)
        XCTAssertEqual(channel.receive([0x02, 0x00], now: now), [], file: file, line: line)
        XCTAssertEqual(channel.tick(now: now + .nanoseconds(1)), [], file: file, line: line)
        XCTAssertThrowsError(try channel.sendText("x", id: .random(), sentAt: 0, now: now), file: file, line: line) { error in
            XCTAssertEqual(error as? CallSendError, .closed, file: file, line: line)
        }
    }

    // MARK: Frames

    func testATamperedFrameFailsAuthentication() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        var frame = try peer.seal(json: RawChannelPeer.text())
        frame[frame.count / 2] ^= 0x01
        assertClosed(&channel, by: channel.receive(frame, now: now), .authenticationFailure)
    }

    func testAReplayedFrameFailsAuthentication() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        let frame = try peer.seal(json: RawChannelPeer.text())
        XCTAssertEqual(channel.receive(frame, now: now).deliveries.count, 1)
        assertClosed(&channel, by: channel.receive(frame, now: now), .authenticationFailure)
    }

    func testAReorderedFrameFailsAuthentication() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        _ = try peer.seal(json: RawChannelPeer.text(text: "first, never delivered"))
        let second = try peer.seal(json: RawChannelPeer.text(text: "second"))
        assertClosed(&channel, by: channel.receive(second, now: now), .authenticationFailure)
    }

    func testAnUnknownTypeByteTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        var frame = try peer.seal(json: RawChannelPeer.text())
        frame[0] = 0x03
        assertClosed(&channel, by: channel.receive(frame, now: now), .unknownFrameType(0x03))
        var fresh = Fixture.channel(.responder)
        assertClosed(&fresh, by: fresh.receive([0x00] + [UInt8](repeating: 1, count: 48), now: now), .unknownFrameType(0x00))
    }

    func testAnEmptyFrameTerminates() throws {
        var (channel, _) = try rawSession(channelRole: .responder)
        assertClosed(&channel, by: channel.receive([], now: now), .emptyFrame)
    }

    func testAFrameOf32785BytesPassesAndOneByteMoreTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        // An ignored receipt padded with an unknown field to exactly 32,768 bytes.
        let head = #"{"v":2,"type":"receipt","id":"\#(MessageID.random().text)","pad":""#
        let padding = String(repeating: "p", count: CallChannelLimits.maxPayloadBytes - head.utf8.count - 2)
        let largest = try peer.seal(json: head + padding + #""}"#)
        XCTAssertEqual(largest.count, CallChannelLimits.maxFrameBytes)
        XCTAssertEqual(channel.receive(largest, now: now), [])
        XCTAssertNil(channel.failure)
        let oversize = [0x02] + [UInt8](repeating: 0, count: CallChannelLimits.maxFrameBytes)
        assertClosed(&channel, by: channel.receive(oversize, now: now), .oversizeFrame(32_786))
    }

    func testHandshakeFramesOutOfPlaceTerminate() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        assertClosed(&channel, by: channel.receive([0x01] + [UInt8](repeating: 7, count: 48), now: now), .unexpectedFrame)

        var unstarted = Fixture.channel(.initiator)
        assertClosed(&unstarted, by: unstarted.receive([0x01] + [UInt8](repeating: 7, count: 48), now: now), .unexpectedFrame)

        var early = Fixture.channel(.responder)
        assertClosed(&early, by: early.receive(try peer.seal(RawChannelPeer.confirmation), now: now), .unexpectedFrame)
    }

    func testAForgedOrPayloadCarryingHandshakeMessageFails() throws {
        var channel = Fixture.channel(.responder)
        var peer = try RawChannelPeer(role: .initiator)
        var forged = try peer.writeHandshake()
        forged[forged.count - 1] ^= 0x80
        assertClosed(&channel, by: channel.receive(forged, now: now), .handshakeFailed)

        // A stranger's static key: the pre-message binds Alice's, so message 1 cannot verify.
        var stranger = CallSecureChannel(role: .responder, callID: Fixture.callID, localID: Fixture.bob, remoteID: Fixture.alice,
                                         localAgreementKey: Fixture.bobKey, remoteAgreementKey: Fixture.key(0x55).publicKey, now: now)
        var honest = try RawChannelPeer(role: .initiator)
        assertClosed(&stranger, by: stranger.receive(try honest.writeHandshake(), now: now), .handshakeFailed)
    }

    // MARK: Key confirmation

    func testAFirstPlaintextOtherThanTheConfirmationTerminates() throws {
        for wrong in [Array("cryptext.channel-ready.v1".utf8), Array("cryptext.channel-ready.v2\n".utf8), []] {
            var (channel, peer) = try rawSession(channelRole: .initiator, confirmed: false)
            assertClosed(&channel, by: channel.receive(try peer.seal(wrong), now: now), .badConfirmation)
        }
    }

    func testChatBeforeTheConfirmationTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .responder, confirmed: false)
        assertClosed(&channel, by: channel.receive(try peer.seal(json: RawChannelPeer.text()), now: now), .badConfirmation)
    }

    func testARotationDuringKeyConfirmationTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator, confirmed: false)
        assertClosed(&channel, by: channel.receive(try peer.requestRotation(), now: now), .badConfirmation)
    }

    func testASecondConfirmationOrAnUnknownPlaintextTerminates() throws {
        for plaintext in [RawChannelPeer.confirmation, [0x12, 0x00], [0x20] + Array("{}".utf8), []] {
            var (channel, peer) = try rawSession(channelRole: .responder)
            assertClosed(&channel, by: channel.receive(try peer.seal(plaintext), now: now), .unknownPlaintext)
        }
    }

    func testNoConfirmationWithinFifteenSecondsTerminates() throws {
        var (channel, _) = try rawSession(channelRole: .initiator, confirmed: false)
        XCTAssertEqual(channel.nextTick, now + CallChannelLimits.confirmationTimeout)
        XCTAssertEqual(channel.tick(now: now + CallChannelLimits.confirmationTimeout - .nanoseconds(1)), [])
        assertClosed(&channel, by: channel.tick(now: now + CallChannelLimits.confirmationTimeout), .confirmationTimeout)
    }

    // MARK: Payloads

    func testMalformedPayloadsTerminateWithTheirReason() throws {
        let id = MessageID.random().text
        let cases: [(String, CallPayloadProblem)] = [
            (#"{"v":1,"type":"text","id":"\#(id)","text":"hi","sentAt":1}"#, .version),
            (#"{"v":"2","type":"text","id":"\#(id)","text":"hi","sentAt":1}"#, .version),
            (#"{"v":2.0,"type":"text","id":"\#(id)","text":"hi","sentAt":1}"#, .version),
            (#"{"type":"text","id":"\#(id)","text":"hi","sentAt":1}"#, .version),
            (#"{"v":2,"type":"typing","id":"\#(id)"}"#, .unknownType),
            (#"{"v":2,"id":"\#(id)"}"#, .unknownType),
            (#"{"v":2,"type":"text","type":"text","id":"\#(id)","text":"hi","sentAt":1}"#, .notJSONObject),
            (#"{"v":2,"type":"text","id":"\#(id)","text":"hi","sentAt":1"#, .notJSONObject),
            (#"{"v":2,"type":"text","id":"\#(id)","text":"hi","sentAt":1} x"#, .notJSONObject),
            (RawChannelPeer.text(id: id, text: String(repeating: "é", count: 4_001)), .textLength),
            (RawChannelPeer.text(id: id, text: ""), .textLength),
            (RawChannelPeer.text(id: id.uppercased()), .field("id")),
            (RawChannelPeer.text(id: "0b7e2c1a9f3d4e5b8c6a1d2e3f405162"), .field("id")),
            (#"{"v":2,"type":"receipt","id":7}"#, .field("id")),
            (#"{"v":2,"type":"text","id":"\#(id)","sentAt":1}"#, .field("text")),
            (RawChannelPeer.text(id: id, sentAt: "1.5"), .field("sentAt")),
            (RawChannelPeer.text(id: id, sentAt: "1e3"), .field("sentAt")),
            (RawChannelPeer.text(id: id, sentAt: "\"1\""), .field("sentAt")),
            (RawChannelPeer.text(id: id, sentAt: "18014398509481984"), .field("sentAt")),
            (#"{"v":2,"type":"text","id":"\#(id)","text":"hi"}"#, .field("sentAt")),
        ]
        for (json, problem) in cases {
            var (channel, peer) = try rawSession(channelRole: .initiator)
            let actions = channel.receive(try peer.seal(json: json), now: now)
            XCTAssertEqual(actions.deliveries, [], json)
            assertClosed(&channel, by: actions, .malformedPayload(problem))
        }
    }

    func testA4000ScalarTextWithUnknownFieldsIsAccepted() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        let id = MessageID.random()
        let text = String(repeating: "é", count: 4_000)
        let json = #"{"sentAt":-5,"text":"\#(text)","extra":{"a":[1.5]},"id":"\#(id.text)","type":"text","v":2}"#
        let actions = channel.receive(try peer.seal(json: json), now: now)
        XCTAssertEqual(actions.deliveries, [.text(id: id, text: text, sentAt: -5)])
        let receipt = try peer.open(try XCTUnwrap(actions.frames.first))
        XCTAssertEqual(String(decoding: receipt, as: UTF8.self), #"{"v":2,"type":"receipt","id":"\#(id.text)"}"#)
    }

    func testAReceiptForAnUnknownOrAlreadyReceiptedIdIsIgnored() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        let id = MessageID.random()
        XCTAssertEqual(channel.receive(try peer.seal(json: #"{"v":2,"type":"receipt","id":"\#(id.text)"}"#), now: now), [])
        let sent = try channel.sendText("mine", id: id, sentAt: 1, now: now)
        _ = try peer.open(try XCTUnwrap(sent.frames.first))
        let receipt = #"{"v":2,"type":"receipt","id":"\#(id.text)"}"#
        XCTAssertEqual(channel.receive(try peer.seal(json: receipt), now: now), [.deliver(.receipt(id: id))])
        XCTAssertEqual(channel.receive(try peer.seal(json: receipt), now: now), [])
        XCTAssertNil(channel.failure)
    }

    // MARK: Rotation

    func testAResponseWithoutARequestTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        var nn = try HandshakeState(try NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256"), role: .initiator)
        var other = try HandshakeState(try NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256"), role: .responder)
        _ = try other.readMessage(try nn.writeMessage())
        let response = try peer.seal([0x11] + (try other.writeMessage()))
        assertClosed(&channel, by: channel.receive(response, now: now), .rotation(.responseWithoutRequest))
    }

    func testASecondRequestWhileTheCallersOwnIsPendingTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        let own = try channel.rotate(now: now)
        _ = try peer.open(try XCTUnwrap(own.frames.first))
        XCTAssertEqual(channel.receive(try peer.requestRotation(), now: now), [], "the caller's own request wins")
        assertClosed(&channel, by: channel.receive(try peer.requestRotation(), now: now), .rotation(.repeatedRequest))
    }

    func testASecondRequestUnderTheOldKeysAfterTheAnswerFailsAuthentication() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        let first = try peer.requestRotation()
        let second = try peer.requestRotation()
        let answer = channel.receive(first, now: now)
        XCTAssertEqual(answer.frames.count, 1)
        XCTAssertEqual(channel.epoch, 1)
        assertClosed(&channel, by: channel.receive(second, now: now), .authenticationFailure)
    }

    func testMalformedRotationMessagesTerminate() throws {
        for nn in [[UInt8](repeating: 9, count: 31), [UInt8](repeating: 9, count: 33), [UInt8](repeating: 0, count: 32)] {
            var (channel, peer) = try rawSession(channelRole: .responder)
            assertClosed(&channel, by: channel.receive(try peer.seal([0x10] + nn), now: now), .rotation(.malformedMessage))
        }
        var (channel, peer) = try rawSession(channelRole: .initiator)
        _ = try peer.open(try XCTUnwrap(try channel.rotate(now: now).frames.first))
        assertClosed(&channel, by: channel.receive(try peer.seal([0x11] + [UInt8](repeating: 9, count: 48)), now: now),
                     .rotation(.malformedMessage))
    }

    func testARawPeerCanCompleteARotationTheChannelStarted() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        let request = try channel.rotate(now: now)
        let response = try peer.answerRotation(try peer.open(try XCTUnwrap(request.frames.first)))
        XCTAssertEqual(channel.receive(response, now: now), [.rotated(epoch: 1)])
        let text = channel.receive(try peer.seal(json: RawChannelPeer.text(text: "new keys")), now: now)
        XCTAssertEqual(text.deliveries.count, 1)
        XCTAssertEqual(try peer.open(try XCTUnwrap(text.frames.first)).first, UInt8(ascii: "{"))
    }

    func testASixtyFifthHeldMessageTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        _ = try peer.open(try XCTUnwrap(try channel.rotate(now: now).frames.first))
        for n in 1...64 {
            XCTAssertEqual(try channel.sendText("\(n)", id: .random(), sentAt: 0, now: now), [])
        }
        assertClosed(&channel, by: try channel.sendText("65", id: .random(), sentAt: 0, now: now), .rotationQueueOverflow)
    }

    func testReceiptsForTextsArrivingDuringARotationAreHeldAndCountTowardTheQueue() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        _ = try peer.open(try XCTUnwrap(try channel.rotate(now: now).frames.first))
        let first = now + Fixture.seconds(2), later = now + Fixture.seconds(4)
        for n in 1...40 {
            XCTAssertEqual(channel.receive(try peer.seal(json: RawChannelPeer.text(text: "\(n)")), now: first).deliveries.count, 1)
        }
        for n in 41...64 {
            XCTAssertEqual(channel.receive(try peer.seal(json: RawChannelPeer.text(text: "\(n)")), now: later).frames, [])
        }
        assertClosed(&channel, by: channel.receive(try peer.seal(json: RawChannelPeer.text(text: "65")), now: later),
                     .rotationQueueOverflow)
    }

    // MARK: Limits

    func testTheFortyFirstFrameWithinOneSecondTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        // The handshake frames opened a window at `now`; this one starts well after it.
        let start = now + Fixture.seconds(2)
        let receipt = #"{"v":2,"type":"receipt","id":"\#(MessageID.random().text)"}"#
        for n in UInt64(0)..<40 { XCTAssertEqual(channel.receive(try peer.seal(json: receipt), now: start + Fixture.ms(n)), []) }
        // Exactly 1,000 ms after the window's first frame is still inside it (relay.md §2.5).
        assertClosed(&channel, by: channel.receive(try peer.seal(json: receipt), now: start + Fixture.seconds(1)),
                     .incomingRateExceeded)
    }

    func testFortyFramesPerWindowAreAcceptedIndefinitely() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        let receipt = #"{"v":2,"type":"receipt","id":"\#(MessageID.random().text)"}"#
        // Each window starts at its first frame and still holds a frame exactly 1,000 ms later.
        var start = now
        for _ in 1...5 {
            start += Fixture.seconds(1) + .nanoseconds(1)
            for n in UInt64(0)..<40 {
                let at = start + (n == 39 ? Fixture.seconds(1) : Fixture.ms(n))
                XCTAssertEqual(channel.receive(try peer.seal(json: receipt), now: at), [])
            }
            start += Fixture.seconds(1)
        }
        XCTAssertNil(channel.failure)
    }

    func testTheHundredThousandAndFirstIncomingFrameTerminates() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        let receipt = #"{"v":2,"type":"receipt","id":"\#(MessageID.random().text)"}"#
        // 2 frames so far (message 1 and the confirmation).
        var t = now
        for n in 3...CallChannelLimits.framesPerDirection {
            if n % 40 == 0 { t += Fixture.seconds(1) + .nanoseconds(1) }
            let actions = channel.receive(try peer.seal(json: receipt), now: t)
            guard actions.isEmpty else { return XCTFail("frame \(n): \(actions)") }
        }
        assertClosed(&channel, by: channel.receive(try peer.seal(json: receipt), now: t + Fixture.seconds(1)), .frameLimit(.incoming))
    }

    func testTheSenderStopsAtItsHundredThousandthFrame() throws {
        var (channel, peer) = try rawSession(channelRole: .initiator)
        var sent = 2, rotations = 0, t = now
        var failure: CallChannelFailure?
        // One text per 33 ms stays under the pace (40 per 1.25 s); the peer answers each
        // rotation in turn.
        while failure == nil {
            t += Fixture.ms(33)
            var pending = try channel.sendText("x", id: .random(), sentAt: 0, now: t) + channel.tick(now: t)
            while !pending.isEmpty {
                switch pending.removeFirst() {
                case let .send(frame):
                    sent += 1
                    let plaintext = try peer.open(frame)
                    if plaintext.first == 0x10 {
                        rotations += 1
                        pending += channel.receive(try peer.answerRotation(plaintext), now: t)
                    }
                case let .terminate(reason): failure = reason
                default: break
                }
            }
        }
        XCTAssertEqual(failure, .frameLimit(.outgoing))
        XCTAssertEqual(sent, CallChannelLimits.framesPerDirection, "every frame the sender may send, and not one more")
        XCTAssertGreaterThan(rotations, 190, "one rotation per 500 frames")
    }

    func testTheSessionEndsAfterOneHour() throws {
        var (channel, peer) = try rawSession(channelRole: .responder)
        let end = now + CallChannelLimits.sessionDuration
        XCTAssertEqual(channel.nextTick, end)
        XCTAssertEqual(channel.tick(now: end - .nanoseconds(1)), [])
        let late = try peer.seal(json: RawChannelPeer.text())
        assertClosed(&channel, by: channel.receive(late, now: end), .sessionTimeLimit)

        var (idle, _) = try rawSession(channelRole: .initiator)
        assertClosed(&idle, by: idle.tick(now: end), .sessionTimeLimit)
    }
}
