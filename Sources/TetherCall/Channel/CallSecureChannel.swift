public import TetherSync
public import TetherCrypto
public import TetherWire
import TetherNoise
public import TetherEncoding

/// The call's end-to-end channel (signaling.md §9, §10) as a pure state machine: frames and user
/// requests in, frames to send and things to show out, the monotonic time (nanoseconds) passed
/// with every event. No I/O and no clock of its own, so every rule — the KK handshake and key
/// confirmation, payload validation, the limits, pacing and NN rotation — is testable frame by
/// frame; the caller runs it over the data channel and calls `tick` by `nextTick`.
///
/// Fails closed: the first violation returns `.terminate` and releases every key; afterwards
/// every event returns nothing and every request throws `CallSendError.closed`.
public struct CallSecureChannel: Sendable {
    /// Which side of the KK handshake this is.
    public enum Role: Sendable, Hashable {
        /// The caller (the side that sent `offer`): it writes handshake message 1.
        case initiator
        /// The callee.
        case responder
    }

    enum Phase: Sendable {
        /// The initiator waits for `start`, the responder for message 1.
        case awaitingHandshake
        /// The initiator wrote message 1 and waits for message 2.
        case handshaking(HandshakeState)
        /// Split done and this side's confirmation sent; the peer's is awaited (§9.3).
        case confirming
        case authenticated
        case terminated(CallChannelFailure)
    }

    static let kk = try! NoiseProtocol(name: "Noise_KK_25519_ChaChaPoly_SHA256")
    static let nn = try! NoiseProtocol(name: "Noise_NN_25519_ChaChaPoly_SHA256")
    static let handshakeFrame: UInt8 = 0x01
    static let transportFrame: UInt8 = 0x02
    static let rotateInit: UInt8 = 0x10
    static let rotateResponse: UInt8 = 0x11
    static let payloadStart = UInt8(ascii: "{")
    /// Key confirmation (§9.3): each side's first transport plaintext.
    static let confirmation = Array("cryptext.channel-ready.v2".utf8)

    /// The KK role: the caller initiates.
    public let role: Role
    /// The call this channel belongs to (bound into the prologue).
    public let callID: CallUUID
    /// This side's ID.
    public let localID: SignalingID
    /// The peer's ID, whose agreement key the handshake authenticates.
    public let remoteID: SignalingID
    let localAgreementKey: X25519.PrivateKey
    let remoteAgreementKey: X25519.PublicKey
    var fixedEphemerals: FixedEphemerals?
    /// The session's start: the one-hour limit and the confirmation timeout run from here.
    let createdAt: MonotonicInstant

    var phase: Phase = .awaitingHandshake
    /// The current epoch's CipherStates; nil before Split and after termination.
    var transport: NoiseTransport?
    /// The KK handshake hash `h` (§9.3, §10): not key material, so it outlives the handshake.
    public internal(set) var sessionID: [UInt8]?
    /// 0 for the KK keys, then one more per completed rotation (§10).
    public internal(set) var epoch = 0
    var epochStartedAt = MonotonicInstant.zero
    var sentUnderEpoch = 0
    /// This side's NN handshake while it waits for `ROTATE_RESP`.
    var pendingRotation: HandshakeState?
    /// Plaintexts held until the pending rotation completes (§10).
    var held: [[UInt8]] = []
    /// The caller ignored one crossing `ROTATE_INIT` during its own rotation (§10).
    var ignoredPeerRequest = false
    var framesSent = 0
    var framesReceived = 0
    var pacer = FramePacer(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.pacingWindow)
    var incoming = IncomingFrameWindow(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.rateWindow)
    var receivedTexts = RecentMessageIDs(capacity: CallChannelLimits.dedupWindow)
    var awaitingReceipt = RecentMessageIDs(capacity: CallChannelLimits.receiptWindow)

    /// - Parameters:
    ///   - role: `.initiator` for the caller.
    ///   - callID: the call, bound into the KK prologue (§9.1).
    ///   - localID: this side's ID.
    ///   - remoteID: the peer's ID.
    ///   - localAgreementKey: this identity's agreement key, the Noise static key.
    ///   - remoteAgreementKey: the peer's agreement key from its `offer` or `answer`, already
    ///     verified against `remoteID` (§3.2, §7.2).
    ///   - now: when the data channel opened (monotonic nanoseconds).
    public init(role: Role, callID: CallUUID, localID: SignalingID, remoteID: SignalingID,
                localAgreementKey: X25519.PrivateKey, remoteAgreementKey: X25519.PublicKey, now: MonotonicInstant) {
        self.role = role
        self.callID = callID
        self.localID = localID
        self.remoteID = remoteID
        self.localAgreementKey = localAgreementKey
        self.remoteAgreementKey = remoteAgreementKey
        createdAt = now
    }

    var initiatorID: SignalingID { role == .initiator ? localID : remoteID }
    var responderID: SignalingID { role == .initiator ? remoteID : localID }

    /// The KK prologue (§9.1).
    public static func prologue(callID: CallUUID, initiator: SignalingID, responder: SignalingID) -> [UInt8] {
        Array("cryptext.channel.v2\n\(callID.text)\n\(initiator.canonical)\n\(responder.canonical)".utf8)
    }

    /// The NN prologue of the rotation creating `epoch` (§10): the IDs in their KK roles.
    public static func rotationPrologue(sessionID: [UInt8], initiator: SignalingID, responder: SignalingID, epoch: Int) -> [UInt8] {
        Array("cryptext.rotate.v2\n\(Hex.encode(sessionID))\n\(initiator.canonical)\n\(responder.canonical)\n\(epoch)".utf8)
    }

    /// Key confirmation is done both ways (§9.3): texts may flow.
    public var isAuthenticated: Bool {
        if case .authenticated = phase { return true }
        return false
    }

    /// Why the channel terminated (nil while it lives).
    public var failure: CallChannelFailure? {
        if case let .terminated(failure) = phase { return failure }
        return nil
    }

    /// True while this side waits for `ROTATE_RESP`.
    public var isRotating: Bool { pendingRotation != nil }

    /// Shown only after key confirmation (§11).
    public var safetyNumber: String? { isAuthenticated ? SafetyNumber.of(localID, remoteID) : nil }

    /// Frames paced behind the 40-per-second bound, not yet handed out.
    public var pacedFrameCount: Int { pacer.count }

    /// How many texts `sendText` takes now without their queueing anywhere a limit could end
    /// the call; the sender's application holds the rest (back-pressure, never an error):
    /// - none before key confirmation, and none while this side's rotation is pending: §10's
    ///   64 held messages are kept for the receipts this side owes meanwhile;
    /// - no more than one pacing window of frames waiting to leave, so a rotation request
    ///   (trigger (a) fires at 500 frames) never waits behind seconds of queued texts;
    /// - no more than the receipts this side can still match: every text in flight keeps its
    ///   place until its receipt comes (`CallChannelLimits.receiptWindow`);
    /// - a reserve under §9.6's frames per direction for those receipts and the rotations.
    public var sendWindow: Int {
        guard failure == nil, isAuthenticated, pendingRotation == nil else { return 0 }
        let pacing = CallChannelLimits.framesPerWindow - pacer.count
        let receipts = CallChannelLimits.receiptWindow - awaitingReceipt.count
        let session = CallChannelLimits.framesPerDirection - framesSent - CallChannelLimits.rotationQueueCapacity
        return max(0, min(pacing, receipts, session))
    }

    /// How many texts sent await their receipt.
    public var awaitingReceiptCount: Int { awaitingReceipt.count }

    /// Texts sent whose receipt has not come, oldest first.
    public var awaitingReceiptIDs: [MessageID] { awaitingReceipt.ordered }

    /// Something this side accepted has not fully gone: a frame still paced, a message held for
    /// a rotation, a text without its receipt. A graceful hang-up waits for this to clear.
    public var hasUndelivered: Bool { !pacer.isEmpty || !held.isEmpty || awaitingReceipt.count > 0 }

    /// When `tick` must next run: the next paced frame, the confirmation timeout, the session's
    /// end. Nil once terminated.
    public var nextTick: MonotonicInstant? {
        guard failure == nil else { return nil }
        var due = createdAt + CallChannelLimits.sessionDuration
        if !isAuthenticated { due = min(due, createdAt + CallChannelLimits.confirmationTimeout) }
        if let release = pacer.nextRelease { due = min(due, release) }
        return due
    }

    /// Runs one event: the deadlines first, then `body`, then whatever pacing lets out now. A
    /// failure anywhere terminates, after the actions the event produced before it.
    mutating func run(now: MonotonicInstant, _ body: (inout CallSecureChannel, inout [CallChannelAction]) throws(CallChannelFailure) -> Void) -> [CallChannelAction] {
        guard failure == nil else { return [] }
        var actions: [CallChannelAction] = []
        do throws(CallChannelFailure) {
            try checkDeadlines(now: now)
            try body(&self, &actions)
            for frame in pacer.release(now: now) { actions.append(.send(frame)) }
        } catch {
            actions.append(terminate(error))
        }
        return actions
    }

    private func checkDeadlines(now: MonotonicInstant) throws(CallChannelFailure) {
        let age = now.elapsed(since: createdAt)
        guard age < CallChannelLimits.sessionDuration else { throw .sessionTimeLimit }
        guard isAuthenticated || age < CallChannelLimits.confirmationTimeout else { throw .confirmationTimeout }
    }

    /// Ends the channel and drops every key: cipher states, handshake states, held plaintexts.
    private mutating func terminate(_ failure: CallChannelFailure) -> CallChannelAction {
        phase = .terminated(failure)
        transport = nil
        pendingRotation = nil
        fixedEphemerals = nil
        held = []
        pacer.discard()
        return .terminate(failure)
    }
}
