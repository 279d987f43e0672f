import TetherSync
extension CallMachine {
    /// A report of the current call's media transport.
    mutating func media(_ event: CallMediaEvent, now: CallTime) {
        guard let call = current else { return }
        // Once the channel closed, only a failure can still change anything.
        if call.mediaClosed, event != .failed { return }
        switch event {
        case let .localDescription(sdp): localDescription(sdp)
        case let .localCandidate(candidate):
            // A candidate no peer would accept (§13.1) is the transport's fault; it is not sent.
            guard candidate.isWellFormed else { return }
            if call.descriptionSent { return sendCandidate(candidate) }
            guard call.heldLocalCandidates.count < CallSetupLimits.heldLocalCandidates else { return end(.candidateQueueOverflow) }
            current?.heldLocalCandidates.append(candidate)
        case .channelOpen: channelOpened(now: now)
        case let .channelMessage(frame): receiveFrame(frame, now: now)
        case .channelClosed: channelClosed(now: now)
        case .failed: end(.mediaFailed)
        }
    }

    /// The offer (caller, still ringing) or the answer (callee, just accepted) leaves with this
    /// identity's signed agreement key; the local candidates held for it follow in order.
    private mutating func localDescription(_ sdp: String) {
        guard var call = current, !call.descriptionSent, call.phase == (call.isCaller ? .ringing : .connecting) else { return }
        let description = CallSignalBody.Description(sdp: sdp, agreementKey: identity.agreementPublicKey,
                                                     identitySignature: identity.identitySignature)
        guard send(call.isCaller ? .offer(description) : .answer(description), call: call.id, to: call.peer) else { return }
        call.descriptionSent = true
        let held = call.heldLocalCandidates
        call.heldLocalCandidates = []
        current = call
        for candidate in held { sendCandidate(candidate) }
    }

    /// The data channel closed under the call. With signaling up the peer's `close` gets
    /// `closeSignalGrace` to arrive and name the reason; the secure channel and its keys go now,
    /// since nothing can flow any more.
    private mutating func channelClosed(now: CallTime) {
        // The peer's close came first and the call only waited for receipts: none can come now.
        if let reason = current?.peerEnded { return end(reason) }
        guard isRegistered else { return end(.mediaClosed) }
        current?.mediaClosed = true
        let unconfirmed = current?.channel?.awaitingReceiptIDs ?? []
        current?.unconfirmed = unconfirmed
        current?.channel = nil
        current?.heldFrames = []
        current?.deadline = (now.monotonic + CallSetupLimits.closeSignalGrace, .mediaClosed)
    }

    private mutating func sendCandidate(_ candidate: CallCandidate) {
        guard let call = current else { return }
        send(.candidate(candidate), call: call.id, to: call.peer)
    }

    /// The data channel is open: the secure channel begins (its 15 s run from now), this side
    /// says `channel`, and then the handler takes frames: the callee's held ones, and the
    /// caller's handshake once the callee's `channel` is in (§7.3 steps 4-5).
    private mutating func channelOpened(now: CallTime) {
        guard var call = current, call.phase == .connecting, call.channel == nil, let peerKey = call.peerAgreementKey else { return }
        call.phase = .securing
        call.deadline = nil
        call.channel = CallSecureChannel(role: call.role, callID: call.id, localID: identity.id, remoteID: call.peer,
                                         localAgreementKey: identity.agreementKey, remoteAgreementKey: peerKey, now: now.monotonic)
        call.channelSent = send(.channel, call: call.id, to: call.peer)
        current = call
        startHandshakeIfReady(now: now)
        releaseHeldFrames(now: now)
    }
}
