import TetherCall
import TetherCrypto
import TetherNoise
import TetherSync
import XCTest

/// The other end of a channel, built straight on TetherNoise with the §9 framing, so a test can
/// send what a faithful `CallSecureChannel` never would: forged, replayed, reordered or
/// malformed frames.
struct RawChannelPeer {
    static let confirmation = Array("cryptext.channel-ready.v2".utf8)
    let role: NoiseRole
    private var handshake: HandshakeState?
    private(set) var transport: NoiseTransport?
    private var rotation: HandshakeState?
    private(set) var epoch = 0
    private(set) var sessionID: [UInt8] = []

    /// Alice's keys as the initiator, Bob's as the responder (§12).
    init(role: NoiseRole) throws {
        self.role = role
        let prologue = CallSecureChannel.prologue(callID: Fixture.callID, initiator: Fixture.alice, responder: Fixture.bob)
        let (mine, theirs) = role == .initiator ? (Fixture.aliceKey, Fixture.bobKey) : (Fixture.bobKey, Fixture.aliceKey)
        handshake = try HandshakeState(try NoiseProtocol(name: "Noise_KK_25519_ChaChaPoly_SHA256"), role: role, prologue: prologue,
                                       staticKey: mine, remoteStaticKey: theirs.publicKey)
    }

    mutating func writeHandshake() throws -> [UInt8] {
        let frame = [0x01] + (try handshake!.writeMessage())
        try splitIfDone()
        return frame
    }

    mutating func readHandshake(_ frame: [UInt8]) throws {
        XCTAssertEqual(frame.first, 0x01)
        XCTAssertEqual(try handshake!.readMessage(Array(frame.dropFirst())), [])
        try splitIfDone()
    }

    private mutating func splitIfDone() throws {
        guard handshake!.isComplete else { return }
        transport = try handshake!.transportChannel()
        sessionID = transport!.handshakeHash
        handshake = nil
    }

    /// A transport frame carrying `plaintext`, whatever it is.
    mutating func seal(_ plaintext: [UInt8]) throws -> [UInt8] { [0x02] + (try transport!.encrypt(plaintext)) }

    mutating func seal(json: String) throws -> [UInt8] { try seal(Array(json.utf8)) }

    mutating func open(_ frame: [UInt8]) throws -> [UInt8] {
        XCTAssertEqual(frame.first, 0x02)
        return try transport!.decrypt(Array(frame.dropFirst()))
    }

    private func rotationHandshake(_ role: NoiseRole) throws -> HandshakeState {
        let prologue = CallSecureChannel.rotationPrologue(sessionID: sessionID, initiator: Fixture.alice, responder: Fixture.bob, epoch: epoch + 1)
        return try HandshakeState(try NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256"), role: role, prologue: prologue)
    }

    /// `ROTATE_INIT` under the current epoch; `completeRotation` takes the answer.
    mutating func requestRotation() throws -> [UInt8] {
        var nn = try rotationHandshake(.initiator)
        let frame = try seal([0x10] + (try nn.writeMessage()))
        rotation = nn
        return frame
    }

    mutating func completeRotation(_ plaintext: [UInt8]) throws {
        XCTAssertEqual(plaintext.first, 0x11)
        XCTAssertEqual(try rotation!.readMessage(Array(plaintext.dropFirst())), [])
        transport = try rotation!.transportChannel()
        rotation = nil
        epoch += 1
    }

    /// Answers a decrypted `ROTATE_INIT`: `ROTATE_RESP` under the old epoch, then the new keys.
    mutating func answerRotation(_ plaintext: [UInt8]) throws -> [UInt8] {
        XCTAssertEqual(plaintext.first, 0x10)
        var nn = try rotationHandshake(.responder)
        XCTAssertEqual(try nn.readMessage(Array(plaintext.dropFirst())), [])
        let frame = try seal([0x11] + (try nn.writeMessage()))
        transport = try nn.transportChannel()
        epoch += 1
        return frame
    }

    static func text(id: String = MessageID.random().text, text: String = "hi", sentAt: String = "1700000000000") -> String {
        #"{"v":2,"type":"text","id":"\#(id)","text":"\#(text)","sentAt":\#(sentAt)}"#
    }
}

/// A channel in `role` whose handshake with a raw peer is done; the peer has read the
/// channel's confirmation but not yet sent its own unless `confirmed`.
func rawSession(channelRole: CallSecureChannel.Role, confirmed: Bool = true,
                now: MonotonicInstant = Fixture.start) throws -> (channel: CallSecureChannel, peer: RawChannelPeer) {
    var channel = Fixture.channel(channelRole, now: now)
    var peer = try RawChannelPeer(role: channelRole == .initiator ? .responder : .initiator)
    if channelRole == .initiator {
        try peer.readHandshake(try XCTUnwrap(channel.start(now: now).frames.first))
        let reply = channel.receive(try peer.writeHandshake(), now: now).frames
        XCTAssertEqual(try peer.open(try XCTUnwrap(reply.first)), RawChannelPeer.confirmation)
    } else {
        let reply = channel.receive(try peer.writeHandshake(), now: now).frames
        XCTAssertEqual(reply.count, 2)
        try peer.readHandshake(reply[0])
        XCTAssertEqual(try peer.open(reply[1]), RawChannelPeer.confirmation)
    }
    if confirmed {
        let done = channel.receive(try peer.seal(RawChannelPeer.confirmation), now: now)
        XCTAssertEqual(done.count, 1)
        XCTAssertTrue(channel.isAuthenticated)
    }
    return (channel, peer)
}
