import TetherSync
import TetherWire

extension CallMachine {
    mutating func dial(_ peer: SignalingID, call id: CallUUID, now: CallTime) {
        let refusal: CallDialRefusal? =
            if current != nil { .callInProgress }
            else if peer == identity.id { .ownID }
            // §3.1: an ID that is not a curve point names nobody; nothing signed under it verifies.
            else if IdentityVerification.signingKey(of: peer) == nil { .invalidPeerID }
            else if !isRegistered { .signalingUnavailable }
            else if !credentialsAllowCall(at: now) { .credentialsExpiring }
            else if endedCalls.contains(id) { .callIDReused }
            else { nil }
        if let refusal { return notify(.dialRefused(call: id, refusal)) }
        var call = ActiveCall(id: id, peer: peer, role: .initiator, phase: .ringing)
        call.hasMedia = true
        // From the dial, so an offer the media never produces cannot ring forever either.
        call.deadline = (now.monotonic + CallSetupLimits.ringingTimeout, .timeout(.ringing))
        current = call
        outbox.append(.media(call: id, .createOffer))
    }

    mutating func accept(_ id: CallUUID, now: CallTime) {
        guard var call = current, call.id == id, call.phase == .invited, let offer = call.remoteOffer else { return }
        guard credentialsAllowCall(at: now) else { return end(.credentialsExpiring) }
        call.phase = .connecting
        call.hasMedia = true
        call.remoteOffer = nil
        call.remoteDescriptionSet = true
        // From consent: the answer is made, sent and connected within it.
        call.deadline = (now.monotonic + CallSetupLimits.connectingTimeout, .timeout(.connecting))
        let queued = call.queuedRemoteCandidates
        call.queuedRemoteCandidates = []
        current = call
        outbox.append(.media(call: id, .acceptOffer(sdp: offer)))
        for candidate in queued { outbox.append(.media(call: id, .addRemoteCandidate(candidate))) }
    }

    /// A text joins the call's queue; the channel takes it when its window opens
    /// (`sendQueued`). Refused at once only for what waiting cannot fix.
    mutating func sendText(_ text: String, id: MessageID, sentAt: Int64, call: CallUUID, now: CallTime) {
        guard let active = current, active.id == call, !active.mediaClosed, active.peerEnded == nil else { return notify(.sendRefused(call: call, id: id, .closed)) }
        guard !active.hangingUp else { return notify(.sendRefused(call: call, id: id, .ending)) }
        if let problem = CallPayload.text(id: id, text: text, sentAt: sentAt).sendingProblem {
            return notify(.sendRefused(call: call, id: id, .invalidPayload(problem)))
        }
        guard active.outgoing.count < CallSetupLimits.outgoingTexts else { return notify(.sendRefused(call: call, id: id, .queueFull)) }
        current?.outgoing.append(PendingText(id: id, text: text, sentAt: sentAt))
    }

    /// Hands queued texts to the secure channel while its send window is open, in order.
    mutating func sendQueued(now: CallTime) {
        while let call = current, let next = call.outgoing.first, let channel = call.channel, channel.sendWindow > 0 {
            current?.outgoing.removeFirst()
            do throws(CallSendError) {
                absorb(try current!.channel!.sendText(next.text, id: next.id, sentAt: next.sentAt, now: now.monotonic))
            } catch {
                notify(.sendRefused(call: call.id, id: next.id, error))
            }
        }
    }

    /// A graceful hang-up. A call with nothing to deliver ends now. One with texts in flight
    /// ends once they are delivered, or `hangUpGrace` after the hang-up (after `secured`, for
    /// texts typed before it: the call still gets its setup deadlines to get there, so a script
    /// that writes its lines and closes its input has them sent).
    mutating func hangUp(now: CallTime) {
        guard let call = current else { return }
        if call.phase == .invited { return end(.declined) }
        guard !call.mediaClosed, call.hasUndelivered else { return end(.hungUp) }
        current?.hangingUp = true
        if call.phase == .secured { current?.deadline = (now.monotonic + CallSetupLimits.hangUpGrace, .hungUp) }
    }

    /// A call hanging up since before `secured` starts its grace once secured.
    mutating func startHangUpGraceIfSecured(now: CallTime) {
        guard let call = current, call.hangingUp, call.phase == .secured, call.deadline == nil else { return }
        current?.deadline = (now.monotonic + CallSetupLimits.hangUpGrace, .hungUp)
    }
}
