import TetherWire

extension CallMachine {
    /// Ends the current call: the signal that tells the peer (when it knows the call and
    /// signaling is up), the media's close, the notice. The id is remembered, so whatever
    /// still arrives for the call is dropped as stale.
    mutating func end(_ reason: CallEndReason) {
        guard let call = current else { return }
        // A caller's offer that never left named the call to nobody.
        if let signal = reason.signalToPeer, !call.isCaller || call.descriptionSent {
            send(signal, call: call.id, to: call.peer)
        }
        if call.hasMedia { outbox.append(.media(call: call.id, .close)) }
        current = nil
        remember(call.id)
        for id in call.unconfirmed + (call.channel?.awaitingReceiptIDs ?? []) { notify(.undelivered(call: call.id, id: id, .unconfirmed)) }
        for text in call.outgoing { notify(.undelivered(call: call.id, id: text.id, .notSent)) }
        notify(.ended(call: call.id, reason))
    }

    mutating func remember(_ call: CallUUID) {
        endedCalls.append(call)
        if endedCalls.count > CallSetupLimits.endedCallMemory { endedCalls.removeFirst() }
    }

    /// The call's deadline, if it passed.
    mutating func enforceDeadline(now: CallTime) {
        guard let deadline = current?.deadline, now.monotonic >= deadline.at else { return }
        end(deadline.reason)
    }
}

extension CallEndReason {
    /// What this side tells the peer when the call ends for this reason (nil: the peer ended it,
    /// or cannot be told).
    var signalToPeer: CallSignalBody? {
        switch self {
        case .hungUp, .crossedCall: .close(.hangup)
        case .declined: .reject(.declined)
        case .credentialsExpiring: .reject(.error)
        case .timeout(.invitation): nil
        case .timeout: .close(.timeout)
        case .channelFailed, .mediaFailed, .mediaClosed, .candidateQueueOverflow, .heldFrameOverflow: .close(.error)
        case .peerHungUp, .peerDeclined, .peerBusy, .peerUnavailable, .peerTimedOut, .peerFailed, .signalingLost, .peerOffline: nil
        }
    }
}
