public import TetherCrypto
public import TetherNet
public import TetherWire

/// The pairing-critical conversation of client.md §11–§12 over a `SecureChannel`, for both
/// roles: the verdict, the room-secret courier and its ack, then the `hello` revision handshake.
public enum CompanionSession {
    /// The Mac's typed entry of the phone's code: up to three attempts (client.md §10). Returns
    /// normally after the verdict `accepted` was sent; throws `wrongCode` after `rejected`.
    public static func confirmOnMac(_ channel: SecureChannel, attempts: Int = 3,
                                    enterCode: (Int) async -> String) async throws(CompanionError) {
        for attempt in 1...attempts where SAS.matches(entry: await enterCode(attempt), expected: channel.sas) {
            try send(channel, PairingVerdict.accepted.frame)
            return
        }
        try? channel.send(PairingVerdict.rejected.frame)
        throw .wrongCode
    }

    /// The phone's wait for the verdict: only `accepted` proceeds.
    public static func awaitVerdict(_ channel: SecureChannel) async throws(CompanionError) {
        let frame = try await receive(channel)
        guard PairingVerdict(frame: frame) == .accepted else { throw .pairingDeclined }
    }

    /// Phone, on every connection: courier `roomSecret` and wait for the Mac's ack (§12.4).
    public static func courierRoomSecret(_ channel: SecureChannel, _ secret: RoomSecret, requestID: UInt64) async throws(CompanionError) {
        try send(channel, CompanionEnvelope(requestID: requestID, .relayRoomSecret(secret.bytes)).frame)
        let reply = try await envelope(channel)
        guard reply.requestID == requestID else { throw .protocolViolation("reply for another request") }
        switch reply.payload {
        case .relayRoomSecretStored: return
        case let .error(code, message): throw .protocolViolation("\(code): \(message)")
        default: throw .protocolViolation("expected relayRoomSecretStored")
        }
    }

    /// Mac, on every connection: receive the courier, store it (`store` throws if it cannot),
    /// then ack — or answer `internalError`.
    public static func acceptRoomSecret(_ channel: SecureChannel, store: (RoomSecret) throws -> Void) async throws(CompanionError) -> RoomSecret {
        let message = try await envelope(channel)
        guard case let .relayRoomSecret(bytes) = message.payload, let secret = try? RoomSecret(bytes: bytes) else {
            throw .protocolViolation("expected relayRoomSecret")
        }
        do {
            try store(secret)
        } catch {
            try? channel.send(CompanionEnvelope(requestID: message.requestID, .error(code: "internalError", message: "could not store the room secret")).frame)
            throw .protocolViolation("storing the room secret failed")
        }
        try send(channel, CompanionEnvelope(requestID: message.requestID, .relayRoomSecretStored).frame)
        return secret
    }

    /// Phone: `hello` with our revision; the Mac's reply decides compatibility (§12.5).
    public static func helloFromPhone(_ channel: SecureChannel, requestID: UInt64) async throws(CompanionError) {
        try send(channel, CompanionEnvelope(requestID: requestID, .hello(revision: CompanionRevision.current, minimumPeer: CompanionRevision.minimumPeer,
                                                                          wantsNotificationPermission: nil)).frame)
        let reply = try await envelope(channel)
        guard reply.requestID == requestID, case let .hello(revision, minimum, _) = reply.payload else { throw .protocolViolation("expected hello") }
        let verdict = CompanionRevision.compare(peerRevision: revision, peerMinimumPeer: minimum)
        guard verdict == .compatible else { throw .incompatible(verdict) }
    }

    /// Mac: answer the phone's `hello`.
    public static func helloOnMac(_ channel: SecureChannel) async throws(CompanionError) {
        let request = try await envelope(channel)
        guard case let .hello(revision, minimum, _) = request.payload else { throw .protocolViolation("expected hello") }
        try send(channel, CompanionEnvelope(requestID: request.requestID, .hello(revision: CompanionRevision.current, minimumPeer: CompanionRevision.minimumPeer,
                                                                                 wantsNotificationPermission: false)).frame)
        let verdict = CompanionRevision.compare(peerRevision: revision, peerMinimumPeer: minimum)
        guard verdict == .compatible else { throw .incompatible(verdict) }
    }

    // MARK: Plumbing

    private static func send(_ channel: SecureChannel, _ frame: [UInt8]) throws(CompanionError) {
        do { try channel.send(frame) } catch { throw .channel(error) }
    }

    private static func receive(_ channel: SecureChannel) async throws(CompanionError) -> [UInt8] {
        while true {
            let frame: [UInt8]?
            do { frame = try await channel.receive() } catch { throw .channel(error) }
            guard let frame else { throw .channel(.closed) }
            // Empty frames are dropped (§12.1).
            if CompanionFrameKind(frame) != .empty { return frame }
        }
    }

    private static func envelope(_ channel: SecureChannel) async throws(CompanionError) -> CompanionEnvelope {
        let frame = try await receive(channel)
        guard let envelope = CompanionEnvelope(frame: frame) else { throw .protocolViolation("not an envelope") }
        return envelope
    }
}
