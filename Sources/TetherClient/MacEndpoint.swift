import Foundation
public import TetherCrypto
import TetherNet
public import TetherWire
public import TetherDevice
import Synchronization
import TetherSync

/// The Mac role (client.md §16; design "Pairing flow", "Established rooms", "Reconnection"):
/// unpaired, it mints a pairing id, parks in the room and shows the link, answers the phone's
/// Noise XK handshake, takes the phone's code as typed input (3 attempts, constant-time),
/// sends the verdict, pins the phone's key, stores the couriered room secret and acks it;
/// paired, it parks with signed joins and serves the session, re-parking whenever it ends.
public final class MacEndpoint: CompanionEndpoint, EndpointRole {
    /// The loop, state directory, event sink and outgoing queue this endpoint runs with.
    public let context: EndpointContext
    /// How long a pairing link lives without a phone using it (client.md §2.6).
    public static let pairingLinkLifetime: Duration = .seconds(120)
    /// Routine re-park delay: 5 s doubling to a 60 s cap, reset by a successful park (§14).
    static func reparkDelay(failures: Int) -> Duration { min(.seconds(60), .seconds(5 * (1 << min(failures, 4)))) }

    /// Where a new pairing lives (ignored once paired: the stored pairing names its relay).
    public let transport: PairingLink.Transport?
    /// How long this endpoint's pairing link lives (set once, at init).
    public let pairingLinkLifetime: Duration
    private let enterCode: @Sendable (Int) async -> String?
    /// Whether any park has succeeded in this run: before that, an unreachable relay is the
    /// user's mistake to hear about at once (a wrong URL), not something to wait out.
    private let everParked = Atomic(false)
    private let lastPushStatus = Locked<PushStatus?>(nil)

    /// `enterCode(attempt)` returns the code the user typed, or nil if no more input will come.
    public init(context: EndpointContext, transport: PairingLink.Transport?, pairingLinkLifetime: Duration = MacEndpoint.pairingLinkLifetime,
                enterCode: @escaping @Sendable (Int) async -> String?) {
        self.transport = transport
        self.pairingLinkLifetime = pairingLinkLifetime
        self.enterCode = enterCode
        self.context = context
    }

    /// The phone's last `pushStatus` (client.md §12.6), kept across sessions: its
    /// `relayCredentials` are the hex token and secret the Mac sends in Profile I pushes
    /// (push.md §3.3). Nil until a phone sent one.
    public var pushStatus: PushStatus? { lastPushStatus.withLock { $0 } }

    func received(_ status: PushStatus) { lastPushStatus.withLock { $0 = status } }

    /// Pairs if needed, then serves sessions until a fatal error (thrown) or cancellation.
    public func run() async throws(CompanionError) {
        let key: X25519.PrivateKey
        do { key = try state.staticKey() } catch { throw .state(error) }
        while !Task.isCancelled {
            if let pairing = try storedPairing() {
                try await serveEstablished(pairing, key: key)
            } else {
                try await pairOnce(key: key)
            }
        }
    }

    private func storedPairing() throws(CompanionError) -> (MacPairing, RoomSecret)? {
        do {
            guard let pairing = try state.macPairing(), let secret = try state.roomSecret() else { return nil }
            return (pairing, secret)
        } catch { throw .state(error) }
    }

    // MARK: First pairing

    /// One pairing id's life: park, wait for a phone, confirm. Returns when paired (the session
    /// then ran and ended), or when the id expired or was voided (the caller starts a new one).
    private func pairOnce(key: X25519.PrivateKey) async throws(CompanionError) {
        guard let transport else { throw .notPaired }
        let pid = PairingLink.makePairingID(randomBytes: SecureRandom.bytes(8))
        let link: PairingLink
        do { link = try PairingLink(transport: transport, responderStaticKey: key.publicKey.rawRepresentation, pairingID: pid, allowLoopbackHTTP: true) }
        catch { throw .invalidLink(error) }
        let resolver = RelayResolver(transport: transport, loop: context.loop, tls: context.tls)
        let expiry = context.clock.now.advanced(by: pairingLinkLifetime)
        var announced = false
        var failures = 0
        var parks = 0
        while !Task.isCancelled {
            let remaining = expiry - context.clock.now
            guard remaining > .zero else { return events(.pairingRestarted(CompanionError.pairingExpired(lifetime: pairingLinkLifetime).description)) }
            let socket: AdmittedSocket
            let room: RelayRoom
            do {
                // Every re-park of a v2 link refetches the map: the park may have ended in a reshard.
                room = RelayRoom(origin: try await context.resolve(resolver, link.roomName, force: parks > 0), name: link.roomName)
                parks += 1
                socket = try await context.join(room, role: .mac, proof: .park)
            } catch {
                if error.signal == .fatal { throw error }
                if !everParked.load(ordering: .acquiring), case .relay(.unreachable) = error { throw error }
                let delay = min(Self.reparkDelay(failures: failures), max(.zero, remaining))
                failures += 1
                events(.disconnected(reason: error.description, retryIn: delay))
                if await context.pause(delay, watching: resolver, link.roomName) { failures = 0 }
                continue
            }
            everParked.store(true, ordering: .releasing)
            if !announced {
                announced = true
                events(.pairingLink(link))
            }
            events(.waitingForPeer)
            let channel: SecureChannel
            do throws(CompanionError) {
                channel = try await withDeadline(after: remaining, onTimeout: .pairingExpired(lifetime: pairingLinkLifetime)) { () throws(CompanionError) in
                    try await Self.respond(socket, key: key, pairingID: pid, pinnedPeer: nil)
                }
            } catch .pairingExpired(_) {
                socket.close()
                return events(.pairingRestarted(CompanionError.pairingExpired(lifetime: pairingLinkLifetime).description))
            } catch {
                // The phone left mid-handshake or the park was lost: park again, same link — at
                // once the first time, then with the re-park backoff, so a relay that keeps
                // closing parks is not hammered.
                socket.close()
                let delay = failures == 0 ? .zero : min(Self.reparkDelay(failures: failures - 1), max(.zero, expiry - context.clock.now))
                failures += 1
                if delay > .zero {
                    events(.disconnected(reason: error.description, retryIn: delay))
                    await context.pause(delay)
                }
                continue
            }
            try await confirm(channel, socket: socket, link: link)
            return
        }
    }

    /// SAS entry, verdict, pin, room-secret courier, hello, then the session.
    private func confirm(_ channel: SecureChannel, socket: AdmittedSocket, link: PairingLink) async throws(CompanionError) {
        guard let phoneKey = channel.remoteStaticKey else { throw .protocolViolation("no phone static key") }
        events(.enterCode)
        let entry = enterCode
        let events = self.events
        let outcome: Result<Void, CompanionError> = await withTaskGroup(of: Result<Void, CompanionError>?.self) { group in
            group.addTask {
                let inputEnded = InputEnded()
                do throws(CompanionError) {
                    try await CompanionSession.confirmOnMac(channel) { attempt in
                        if inputEnded.value { return "" }
                        if attempt > 1 { events(.wrongCode(attemptsLeft: 4 - attempt)) }
                        guard let code = await entry(attempt) else {
                            inputEnded.value = true
                            return ""
                        }
                        return code
                    }
                    return .success(())
                } catch {
                    return .failure(inputEnded.value && !Task.isCancelled ? .noCodeEntered : error)
                }
            }
            group.addTask {
                _ = await socket.ended()
                return Task.isCancelled ? nil : .failure(.pairingDeclined)
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(.pairingDeclined)
        }
        switch outcome {
        case .success: break
        case .failure(.noCodeEntered):
            // The verdict `rejected` is on its way; the close handshake sees it out before the
            // caller (likely about to exit) goes on.
            socket.close()
            _ = await socket.ended()
            throw .noCodeEntered
        case .failure(.wrongCode):
            socket.close()
            return events(.pairingRestarted(CompanionError.wrongCode.description))
        case .failure:
            try? channel.send(PairingVerdict.rejected.frame)
            socket.close()
            return events(.pairingRestarted("the phone left before the code was confirmed"))
        }
        let pairing = MacPairing(transport: link.transport, pairingID: link.pairingID, phoneStaticKey: phoneKey)
        let state = self.state
        do {
            _ = try await withDeadline(after: .seconds(30), onTimeout: .timedOut("the phone's room secret")) { () throws(CompanionError) in
                try await CompanionSession.acceptRoomSecret(channel) { secret in
                    // The secret first: a stored pairing always has its secret.
                    try state.storeRoomSecret(secret)
                    try state.storeMacPairing(pairing)
                }
            }
            try await withDeadline(after: .seconds(30), onTimeout: .timedOut("the phone's hello")) { () throws(CompanionError) in
                try await CompanionSession.helloOnMac(channel)
            }
        } catch {
            socket.close()
            if (try? storedPairing()) == nil {
                return events(.pairingRestarted(error.description))
            }
            events(.paired)
            return events(.disconnected(reason: error.description, retryIn: .zero))
        }
        events(.paired)
        _ = try await session(CompanionConnection(role: .mac, channel: channel, socket: socket))
    }

    // MARK: Established room

    private func serveEstablished(_ stored: (MacPairing, RoomSecret), key: X25519.PrivateKey) async throws(CompanionError) {
        let (pairing, secret) = stored
        let name = RoomName(responderStaticKey: key.publicKey.rawRepresentation, pairingID: pairing.pairingID)
        let resolver = RelayResolver(transport: pairing.transport, loop: context.loop, tls: context.tls, versionFloor: state.shardMapVersionFloor)
        var failures = 0
        // Parks that ended before a session started: the first is retried at once (a stale
        // phone's frame, a peer that left), repeats back off.
        var lostParks = 0
        var forceResolve = false
        var reshardBackoff = ReconnectBackoff()
        while !Task.isCancelled {
            guard (try? state.macPairing()) != nil else { return }   // unpaired meanwhile
            let room: RelayRoom
            let socket: AdmittedSocket
            do {
                // After a failure the map is fetched afresh, as the phone does before every
                // reconnect: a node that died sends no 4421, and its buckets may have moved to a
                // survivor (relay.md §8 failover). iTerm2's Mac retries the same host instead.
                room = RelayRoom(origin: try await context.resolve(resolver, name, force: forceResolve || failures > 0), name: name)
                socket = try await context.join(room, role: .mac, proof: .signed(secret))
            } catch {
                try await wait(after: error, failures: &failures, forceResolve: &forceResolve, reshardBackoff: &reshardBackoff,
                               watching: resolver, name)
                continue
            }
            failures = 0
            forceResolve = false
            reshardBackoff.reset()
            events(.waitingForPeer)
            let connection: CompanionConnection
            do throws(CompanionError) {
                let channel = try await Self.respond(socket, key: key, pairingID: pairing.pairingID, pinnedPeer: pairing.phoneStaticKey)
                let state = self.state
                _ = try await withDeadline(after: .seconds(15), onTimeout: .timedOut("the phone's room secret")) { () throws(CompanionError) in
                    try await CompanionSession.acceptRoomSecret(channel) { couriered in
                        if couriered != secret { try state.storeRoomSecret(couriered) }
                    }
                }
                try await withDeadline(after: .seconds(15), onTimeout: .timedOut("the phone's hello")) { () throws(CompanionError) in
                    try await CompanionSession.helloOnMac(channel)
                }
                connection = CompanionConnection(role: .mac, channel: channel, socket: socket)
            } catch {
                socket.close()
                let close = await socket.ended()
                try checkRoomExists(closeReason: close.reason)
                // A park the relay ended says how long to wait: displaced by a newer Mac (60 s),
                // quota spent (30 min), resharded (re-resolve at once); else the re-park backoff.
                let signal = RelaySignal.close(code: close.code, reason: close.reason)
                if case .reResolve = signal { forceResolve = true }
                let delay = signal.fixedDelay
                    ?? (forceResolve ? reshardBackoff.nextAfterReResolve() : lostParks == 0 ? .zero : Self.reparkDelay(failures: lostParks - 1))
                lostParks += 1
                events(.disconnected(reason: error.description, retryIn: delay))
                await context.pause(delay, watching: resolver, name)
                continue
            }
            lostParks = 0
            if case .reResolve = try await session(connection) { forceResolve = true }
            // A fresh secret from the phone (re-pairing on its side) takes effect at the next park.
            if let (_, current) = try storedPairing(), current != secret { return }
        }
    }

    /// Serves one session; after a relay close the Mac re-parks at once (or after the long
    /// backoff of a displacement or spent quota).
    private func session(_ connection: CompanionConnection) async throws(CompanionError) -> RelaySignal {
        try await serveSession(connection) { $0.fixedDelay ?? .zero }
    }

    private func wait(after error: CompanionError, failures: inout Int, forceResolve: inout Bool,
                      reshardBackoff: inout ReconnectBackoff, watching resolver: RelayResolver, _ name: RoomName) async throws(CompanionError) {
        let signal = error.signal
        if signal == .fatal { throw error }
        // After a reshard the Mac re-parks with the reconnect backoff (client.md §14).
        if case .reResolve = signal { forceResolve = true }
        let delay = signal.fixedDelay ?? (forceResolve ? reshardBackoff.nextAfterReResolve() : Self.reparkDelay(failures: failures))
        failures += 1
        events(.disconnected(reason: error.description, retryIn: delay))
        if await context.pause(delay, watching: resolver, name) {
            failures = 0
            reshardBackoff.reset()
        }
    }

    // MARK: Plumbing

    private static func respond(_ socket: AdmittedSocket, key: X25519.PrivateKey, pairingID: String,
                                pinnedPeer: X25519.PublicKey?) async throws(CompanionError) -> SecureChannel {
        do { return try await SecureChannel.respond(over: socket, staticKey: key, pairingID: pairingID, pinnedPeer: pinnedPeer) } catch { throw .channel(error) }
    }

    /// Unpairs: tells a connected phone (`unpaired`), deletes the room on the relay, wipes the
    /// pairing. Works without a running session too.
    public func unpair() async throws(CompanionError) {
        outbox.current?.sayFarewell()
        try await Self.unpair(context: context)
    }

    /// Unpairs the Mac whose pairing `context`'s state directory holds, with no endpoint running:
    /// deletes the room on the relay (a signed `/delete`), then forgets the pairing. A relay that
    /// cannot be reached leaves the pairing in place, so the user can try again.
    public static func unpair(context: EndpointContext) async throws(CompanionError) {
        let key: X25519.PrivateKey
        let pairing: MacPairing?
        let secret: RoomSecret?
        do {
            key = try context.state.staticKey()
            pairing = try context.state.macPairing()
            secret = try context.state.roomSecret()
        } catch { throw .state(error) }
        guard let pairing else { throw .notPaired }
        let name = RoomName(responderStaticKey: key.publicKey.rawRepresentation, pairingID: pairing.pairingID)
        try await context.unpair(transport: pairing.transport, name: name, secret: secret)
    }
}

/// Set once the code entry has no more input to give (then the pairing cannot be confirmed).
private final class InputEnded: Sendable {
    private let ended = Atomic(false)
    var value: Bool {
        get { ended.load(ordering: .acquiring) }
        set { ended.store(newValue, ordering: .releasing) }
    }
}
