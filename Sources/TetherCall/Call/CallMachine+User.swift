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

    mutating func sendText(_ text: String, id: MessageID, sentAt: Int64, call: CallUUID, now: CallTime) {
        guard current?.id == call else { return notify(.sendRefused(call: call, id: id, .closed)) }
        guard current?.mediaClosed == false else { return notify(.sendRefused(call: call, id: id, .closed)) }
        guard current?.channel != nil else { return notify(.sendRefused(call: call, id: id, .notAuthenticated)) }
        do throws(CallSendError) {
            let actions = try current!.channel!.sendText(text, id: id, sentAt: sentAt, now: now.monotonic)
            absorb(actions)
        } catch {
            notify(.sendRefused(call: call, id: id, error))
        }
    }
}
