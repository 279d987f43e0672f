import TetherSync
import TetherEncoding
import TetherWire

/// §6.2 Forwarding, from the sender's side (shape, signature, rate, recipient) and from the
/// recipient's (delivery while routable, within its outbound bound).
extension SignalSocketMachine {
    /// §6.2 steps 1–3 in order; step 4 needs the directory, so it waits for `recipientLookedUp`.
    mutating func signal(_ fields: [String: JSONValue], from id: SignalingID, now: MonotonicInstant) -> [SignalSocketAction] {
        let message: SignalMessage
        switch SignalMessage.parse(fields) {
        case let .failure(fault): return refuse(.badMessage, .badMessage, call: fault.call, kind: fault.kind)
        case let .success(parsed): message = parsed
        }
        guard message.from == id else { return refuse(.badMessage, .badMessage, call: message.call, kind: message.kind) }
        guard let signingKey, signingKey.isValidSignature(message.signature, for: message.signedBytes) else {
            return refuse(.badSignature, .badSignature, call: message.call, kind: message.kind)
        }
        // Counted only once shape and signature passed (§13.1): forgeries cost no budget.
        guard signalWindow.hit(now: now) else { return refuse(.rateLimited, .rateLimited, call: message.call, kind: message.kind) }
        return [.lookUpRecipient(message)]
    }

    /// The directory's answer to `.lookUpRecipient` (§6.2 steps 4–5). Not routable here: across
    /// nodes another node may hold the ID and answers `offline` back if not; on one node the
    /// signal is dropped, never queued [DOC].
    mutating func recipientLookedUp(_ message: SignalMessage, routable: Bool) -> [SignalSocketAction] {
        guard isRoutable else { return [] }
        if routable { return [.count(.signal(message.kind, .forwarded)), .forward(message)] }
        if configuration.clustered { return [.count(.signal(message.kind, .toNode)), .forwardToNode(message)] }
        return [.count(.signal(message.kind, .offline))] + answer(.offline, call: message.call, kind: message.kind)
    }

    /// No node holds the recipient of a signal this connection sent (or it could not be reached).
    mutating func recipientOffline(call: CallUUID, kind: SignalKind) -> [SignalSocketAction] {
        guard isRoutable else { return [] }
        return [.count(.signal(kind, .offline))] + answer(.offline, call: call, kind: kind)
    }

    /// After a forwarded signal was queued on this connection (delivered only while `isRoutable`):
    /// past 1 MiB pending the connection goes rather than buffer without limit (§6.2 step 5,
    /// §6.4, §13.1), with no `error` first.
    mutating func queued(outboundBytes: Int) -> [SignalSocketAction] {
        guard outboundBytes > Self.maxPendingOutbound else { return [] }
        return overflowed()
    }

    /// A `signal` refused by §6.2: counted by outcome and answered, the connection kept.
    private func refuse(_ code: SignalingErrorCode, _ outcome: SignalOutcome, call: CallUUID?, kind: SignalKind?) -> [SignalSocketAction] {
        [.count(.signal(kind, outcome))] + answer(code, call: call, kind: kind)
    }
}
