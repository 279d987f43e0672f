import TetherSync
import TetherNoise

extension CallSecureChannel {
    /// Frame checks in the order that costs least (§9.2, §9.6), then the frame by its type.
    mutating func handle(_ frame: [UInt8], now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        guard let type = frame.first else { throw .emptyFrame }
        guard frame.count <= CallChannelLimits.maxFrameBytes else { throw .oversizeFrame(frame.count) }
        framesReceived += 1
        guard framesReceived <= CallChannelLimits.framesPerDirection else { throw .frameLimit(.incoming) }
        guard incoming.admit(now: now) else { throw .incomingRateExceeded }
        let message = Array(frame.dropFirst())
        switch type {
        case Self.handshakeFrame: try receiveHandshake(message, now: now)
        case Self.transportFrame: try receiveTransport(message, now: now, into: &actions)
        default: throw .unknownFrameType(type)
        }
    }

    /// Decrypts under the current epoch; there is no reordering window, so a replayed,
    /// reordered or stale frame fails authentication like a forged one (§9.6).
    private mutating func receiveTransport(_ message: [UInt8], now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        guard transport != nil else { throw .unexpectedFrame }
        let plaintext: [UInt8]
        do throws(NoiseError) {
            plaintext = try transport!.decrypt(message)
        } catch {
            throw .authenticationFailure
        }
        guard isAuthenticated else {
            guard plaintext == Self.confirmation else { throw .badConfirmation }
            phase = .authenticated
            actions.append(.authenticated(safetyNumber: SafetyNumber.of(localID, remoteID)))
            return
        }
        switch plaintext.first {
        case Self.rotateInit: try receiveRotationRequest(Array(plaintext.dropFirst()), now: now, into: &actions)
        case Self.rotateResponse: try receiveRotationResponse(Array(plaintext.dropFirst()), now: now, into: &actions)
        case Self.payloadStart: try receivePayload(plaintext, now: now, into: &actions)
        default: throw .unknownPlaintext
        }
    }

    /// A text is delivered once and answered with a receipt; a repeat of one of the last 512 is
    /// dropped without one. A receipt is delivered only for a text this side sent (§9.5).
    private mutating func receivePayload(_ plaintext: [UInt8], now: MonotonicInstant, into actions: inout [CallChannelAction]) throws(CallChannelFailure) {
        let payload: CallPayload
        do throws(CallPayloadProblem) {
            payload = try CallPayload(decoding: plaintext)
        } catch {
            throw .malformedPayload(error)
        }
        switch payload {
        case let .text(id, _, _):
            guard !receivedTexts.contains(id) else { return }
            receivedTexts.insert(id)
            actions.append(.deliver(payload))
            try sendMessage(CallPayload.receipt(id: id).encoded, now: now)
        case let .receipt(id):
            guard awaitingReceipt.remove(id) else { return }
            actions.append(.deliver(payload))
        }
    }
}
