extension CallMachine {
    /// Runs one step of the current call's secure channel, if it has one, and carries out what
    /// it asks.
    mutating func runChannel(_ step: (inout CallSecureChannel) -> [CallChannelAction]?) {
        guard current?.channel != nil, let actions = step(&current!.channel!) else { return }
        absorb(actions)
    }

    /// The secure channel's actions, in order, as the call's.
    mutating func absorb(_ actions: [CallChannelAction]) {
        for action in actions {
            guard let id = current?.id else { return }
            switch action {
            case let .send(frame): outbox.append(.media(call: id, .send(frame)))
            case let .authenticated(safetyNumber):
                current?.phase = .secured
                notify(.secured(call: id, safetyNumber: safetyNumber))
            case let .deliver(payload): notify(.message(call: id, payload))
            case let .rotated(epoch): notify(.rotated(call: id, epoch: epoch))
            case .terminate(.confirmationTimeout): end(.timeout(.handshake))
            case let .terminate(failure): end(.channelFailed(failure))
            }
        }
    }

    /// The caller starts the handshake once its data channel is open and the callee's `channel`
    /// arrived (§7.3 step 5); each of the two events calls this.
    mutating func startHandshakeIfReady(now: CallTime) {
        guard let call = current, call.isCaller, call.peerChannelReceived, call.channel != nil else { return }
        runChannel { $0.start(now: now.monotonic) }
    }

    /// One data-channel message: to the channel once its handler is ready, held (16 at most)
    /// before that.
    mutating func receiveFrame(_ frame: [UInt8], now: CallTime) {
        guard let call = current else { return }
        guard call.acceptsFrames else {
            guard call.heldFrames.count < CallSetupLimits.heldFrames else { return end(.heldFrameOverflow) }
            current?.heldFrames.append(frame)
            return
        }
        runChannel { $0.receive(frame, now: now.monotonic) }
    }

    /// The frames held while the handler was not ready, in arrival order.
    mutating func releaseHeldFrames(now: CallTime) {
        guard let held = current?.heldFrames, !held.isEmpty else { return }
        current?.heldFrames = []
        for frame in held { receiveFrame(frame, now: now) }
    }
}
