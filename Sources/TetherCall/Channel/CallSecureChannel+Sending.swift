import TetherSync
import TetherNoise

extension CallSecureChannel {
    /// One application message: held while a rotation is pending, and preceded by a rotation
    /// when a trigger is due (§10: "before sending its next message").
    mutating func sendMessage(_ plaintext: [UInt8], now: MonotonicInstant) throws(CallChannelFailure) {
        if pendingRotation == nil, rotationIsDue(now: now) { try startRotation(now: now) }
        guard pendingRotation == nil else {
            guard held.count < CallChannelLimits.rotationQueueCapacity else { throw .rotationQueueOverflow }
            held.append(plaintext)
            return
        }
        try commitTransport(plaintext)
    }

    private func rotationIsDue(now: MonotonicInstant) -> Bool {
        let age = now.elapsed(since: epochStartedAt)
        return sentUnderEpoch >= CallChannelLimits.rotationFrameTrigger || age >= CallChannelLimits.rotationInterval
    }

    /// Seals under the current epoch and queues the frame for pacing. Frames are sealed in the
    /// order they leave, so nonces and epochs follow the stream even while pacing holds them.
    mutating func commitTransport(_ plaintext: [UInt8]) throws(CallChannelFailure) {
        guard transport != nil else { throw .unexpectedFrame }
        let sealed: [UInt8]
        do throws(NoiseError) {
            sealed = try transport!.encrypt(plaintext)
        } catch {
            throw .cryptoFailure
        }
        try commit(Self.transportFrame, sealed)
        sentUnderEpoch += 1
    }

    /// Counts the frame against the session (§9.6: the sender never sends the 100,001st) and
    /// hands it to the pacer.
    mutating func commit(_ type: UInt8, _ message: [UInt8]) throws(CallChannelFailure) {
        guard framesSent < CallChannelLimits.framesPerDirection else { throw .frameLimit(.outgoing) }
        framesSent += 1
        pacer.enqueue([type] + message)
    }
}
