import TetherSync
import TetherCrypto
import TetherWire

extension CallMachine {
    /// A forwarded signal, checked as §7.2 says; anything failing a check is dropped.
    mutating func receive(_ signal: SignalMessage, now: CallTime) {
        guard isRegistered else { return drop(.notRegistered) }
        guard signal.to == identity.id, signal.from != identity.id else { return drop(.notAddressedHere) }
        guard IdentityVerification.isAuthentic(signal) else { return drop(.badSignature) }
        guard let body = CallSignalBody.parse(signal) else { return drop(.malformedBody) }
        // An offer's or answer's SDP, and the sender's agreement key once it verified (§3.2).
        var signed: (sdp: String, peerKey: X25519.PublicKey)?
        if case let .offer(description) = body { signed = verifiedKey(description, of: signal.from).map { (description.sdp, $0) } }
        if case let .answer(description) = body { signed = verifiedKey(description, of: signal.from).map { (description.sdp, $0) } }
        if body.kind == .offer || body.kind == .answer, signed == nil { return drop(.badAgreementKey) }
        guard !endedCalls.contains(signal.call) else { return drop(.staleCall) }
        if body.kind == .offer, let signed { return receiveOffer(signal, sdp: signed.sdp, peerKey: signed.peerKey, now: now) }
        guard let call = current, call.peer == signal.from, call.id == signal.call else { return drop(.notCurrentCall) }
        switch body {
        case .offer: drop(.unexpected)
        case .answer: if let signed { receiveAnswer(sdp: signed.sdp, peerKey: signed.peerKey, now: now) }
        case let .reject(reason):
            guard call.isCaller, call.phase == .ringing, call.descriptionSent else { return drop(.unexpected) }
            end(reason.endReason)
        case let .candidate(candidate): receiveCandidate(candidate)
        case .channel:
            // Readiness only means something once the call was answered.
            guard call.phase != .ringing, call.phase != .invited else { return drop(.unexpected) }
            current?.peerChannelReceived = true
            startHandshakeIfReady(now: now)
        case let .close(reason): receiveClose(reason.endReason, now: now)
        }
    }

    /// The peer's `close` travels through the server, and can overtake the receipts it sent on
    /// the data channel just before it (a peer that hangs up right after reading a text). While
    /// texts of this side await receipts and the channel is open, the call waits for them, or
    /// for the channel's close, at most `closeSignalGrace`; it takes nothing new meanwhile.
    private mutating func receiveClose(_ reason: CallEndReason, now: CallTime) {
        guard let call = current, !call.mediaClosed, let channel = call.channel, channel.awaitingReceiptCount > 0 else { return end(reason) }
        current?.peerEnded = reason
        current?.deadline = (now.monotonic + CallSetupLimits.closeSignalGrace, reason)
    }

    /// The sender's agreement key, once `identitySig` verifies under `from` and the key is usable
    /// (§3.2); nil otherwise.
    private func verifiedKey(_ description: CallSignalBody.Description, of sender: SignalingID) -> X25519.PublicKey? {
        IdentityVerification.agreementKey(description.agreementKey, signature: description.identitySignature, of: sender,
                                          local: identity.agreementKey)
    }

    /// A valid offer: a new invitation when no call exists, glare (§13.1) when this side is
    /// ringing that same peer, `reject` `busy` otherwise.
    private mutating func receiveOffer(_ signal: SignalMessage, sdp: String, peerKey: X25519.PublicKey, now: CallTime) {
        if let call = current {
            // The caller never takes an offer for its own call, nor the callee a second one.
            guard call.id != signal.call else { return drop(.unexpected) }
            let crossed = call.isCaller && call.phase == .ringing && call.peer == signal.from
            guard crossed, identity.id > signal.from else {
                send(.reject(.busy), call: signal.call, to: signal.from)
                return
            }
            end(.crossedCall)
        }
        var call = ActiveCall(id: signal.call, peer: signal.from, role: .responder, phase: .invited)
        call.peerAgreementKey = peerKey
        call.remoteOffer = sdp
        call.deadline = (now.monotonic + CallSetupLimits.invitationTimeout, .timeout(.invitation))
        current = call
        notify(.incoming(from: signal.from, call: signal.call))
    }

    /// The callee's one answer, to this side's offer once it left.
    private mutating func receiveAnswer(sdp: String, peerKey: X25519.PublicKey, now: CallTime) {
        guard var call = current, call.isCaller, call.phase == .ringing, call.descriptionSent else { return drop(.unexpected) }
        call.peerAgreementKey = peerKey
        call.phase = .connecting
        call.remoteDescriptionSet = true
        call.deadline = (now.monotonic + CallSetupLimits.connectingTimeout, .timeout(.connecting))
        let queued = call.queuedRemoteCandidates
        call.queuedRemoteCandidates = []
        current = call
        outbox.append(.media(call: call.id, .setRemoteAnswer(sdp: sdp)))
        for candidate in queued { outbox.append(.media(call: call.id, .addRemoteCandidate(candidate))) }
        notify(.answered(call: call.id))
    }

    /// A peer candidate: to the media once the remote description is set, queued (64 at most)
    /// before that (§7.3 step 3).
    private mutating func receiveCandidate(_ candidate: CallCandidate) {
        guard let call = current else { return }
        if call.remoteDescriptionSet { return outbox.append(.media(call: call.id, .addRemoteCandidate(candidate))) }
        guard call.queuedRemoteCandidates.count < CallSetupLimits.queuedCandidates else { return end(.candidateQueueOverflow) }
        current?.queuedRemoteCandidates.append(candidate)
    }
}

extension CallSignalBody.RejectReason {
    var endReason: CallEndReason {
        switch self {
        case .declined: .peerDeclined
        case .busy: .peerBusy
        case .error: .peerUnavailable
        }
    }
}

extension CallSignalBody.CloseReason {
    var endReason: CallEndReason {
        switch self {
        case .hangup: .peerHungUp
        case .timeout: .peerTimedOut
        case .error: .peerFailed
        }
    }
}
