import Foundation
public import TetherCrypto
import TetherNet
public import TetherWire
public import TetherEncoding
public import TetherDevice
import TetherSync

/// The phone role (client.md §16): validates the pairing link, resolves the relay, obtains a
/// ticket from its `Attester` when the relay asks for attestation, joins, runs Noise XK as
/// initiator, shows the code until the Mac's verdict, mints and couriers the room secret,
/// registers the verifier only after the Mac's ack; afterwards it reconnects with signed joins,
/// re-couriers the secret and re-runs `hello` on every connection, and classifies every close.
public final class PhoneEndpoint: CompanionEndpoint, EndpointRole {
    /// The loop, state directory, event sink and outgoing queue this endpoint runs with.
    public let context: EndpointContext
    /// How long the code is shown while the Mac decides (client.md §14).
    public static let verdictTimeout: Duration = .seconds(180)
    /// Re-resolves allowed for one attempt when the map is stale (client.md §14).
    static let reResolveMaxAttempts = 3
    /// The end-to-end liveness ping (see `CompanionConnection.startPinging`): as often as the
    /// WebSocket keepalive, and as patient.
    public let pingInterval: Duration
    /// How long a ping may wait for its pong before the channel is closed and a fresh handshake
    /// follows.
    public let pongTimeout: Duration

    /// Answers the relay's attestation requests; nil when the relay runs in open mode.
    public let attester: (any Attester)?
    private let configuredPushStatus = Locked<PushStatus?>(nil)

    /// What the phone couriers to the Mac in `pushStatus` (client.md §12.6, push.md §3.3): sent
    /// after `hello` on every connection while set, and at once on a live session when it
    /// changes (a new APNs token).
    public var pushStatus: PushStatus? {
        get { configuredPushStatus.withLock { $0 } }
        set {
            configuredPushStatus.withLock { $0 = newValue }
            if let newValue { try? outbox.current?.send(CompanionEnvelope(.pushStatus(newValue)).frame) }
        }
    }

    func greeting() -> [UInt8]? {
        pushStatus.map { CompanionEnvelope(.pushStatus($0)).frame }
    }

    /// A phone endpoint. Give an `attester` when the relay requires App Attest (a
    /// ``SoftwareAttester`` on Linux); `pingInterval` and `pongTimeout` pace the end-to-end
    /// liveness check.
    public init(context: EndpointContext, attester: (any Attester)? = nil, pingInterval: Duration = .seconds(15), pongTimeout: Duration = .seconds(10)) {
        self.attester = attester
        self.pingInterval = pingInterval
        self.pongTimeout = pongTimeout
        self.context = context
    }

    /// Pairs with the Mac that shows `link`, then serves sessions like `run()`.
    public func pair(_ link: PairingLink) async throws(CompanionError) {
        // A v1 link without relay= names no relay (client.md §2.2 rule 7), not the default one.
        if case .direct(nil) = link.transport { throw .resolve(.noTransport) }
        try await firstPairing(link, key: try staticKey())
        try await run()
    }

    /// Serves sessions of the stored pairing until a fatal error (thrown) or cancellation.
    public func run() async throws(CompanionError) {
        let key = try staticKey()
        guard let (link, secret) = try storedPairing() else { throw .notPaired }
        let resolver = RelayResolver(transport: link.transport, loop: context.loop, tls: context.tls, versionFloor: state.shardMapVersionFloor)
        var backoff = ReconnectBackoff()
        var resolved = false
        var movedAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            guard (try? state.phonePairing()) != nil else { throw .notPaired }
            do throws(CompanionError) {
                // v2: a fresh map before every reconnect attempt (client.md §5).
                let room = RelayRoom(origin: try await context.resolve(resolver, link.roomName, force: resolved), name: link.roomName)
                resolved = true
                let socket = try await context.join(room, role: .phone, proof: .signed(secret))
                let connection = try await establish(socket, room: room, link: link, key: key, secret: secret, deadline: .seconds(6))
                backoff.reset()
                try await session(connection, backoff: &backoff)
            } catch {
                try await wait(after: error, backoff: &backoff, movedAt: &movedAt, watching: resolver, link.roomName)
            }
        }
    }

    // MARK: First pairing

    private func firstPairing(_ link: PairingLink, key: X25519.PrivateKey) async throws(CompanionError) {
        let resolver = RelayResolver(transport: link.transport, loop: context.loop, tls: context.tls, versionFloor: state.shardMapVersionFloor)
        var origin = try await context.resolve(resolver, link.roomName, force: false)
        events(.relay(origin: origin, disclosedHost: link.disclosedHost))
        var socket: AdmittedSocket?
        var room = RelayRoom(origin: origin, name: link.roomName)
        for attempt in 1...Self.reResolveMaxAttempts {
            do throws(CompanionError) {
                socket = try await context.join(room, role: .phone, proof: try await pairingProof(room))
                break
            } catch {
                guard case .reResolve = error.signal, attempt < Self.reResolveMaxAttempts else { throw error }
                origin = try await context.resolve(resolver, link.roomName, force: true)
                room = RelayRoom(origin: origin, name: link.roomName)
            }
        }
        guard let socket else { throw .relay(.unreachable("no attempt left")) }
        let channel: SecureChannel
        do throws(CompanionError) {
            channel = try await withDeadline(after: .seconds(15), onTimeout: .timedOut("the secure handshake")) { () throws(CompanionError) in
                try await Self.initiate(socket, key: key, link: link)
            }
        } catch {
            socket.close()
            throw error
        }
        events(.showCode(channel.sas))
        do throws(CompanionError) {
            try await withDeadline(after: Self.verdictTimeout, onTimeout: .timedOut("the Mac's confirmation")) { () throws(CompanionError) in
                try await CompanionSession.awaitVerdict(channel)
            }
        } catch {
            // The code is void the instant the connection drops or the verdict is negative.
            events(.codeWithdrawn)
            socket.close()
            throw error
        }
        events(.codeWithdrawn)
        let secret = RoomSecret.generate()
        do {
            try state.storeRoomSecret(secret)
            try state.storePhonePairing(link)
        } catch {
            socket.close()
            state.wipePairing()
            throw .state(error)
        }
        events(.paired)
        let connection: CompanionConnection
        do throws(CompanionError) {
            connection = try await setUp(channel, socket: socket, room: room, link: link, secret: secret)
        } catch {
            // Paired: the reconnect loop finishes the courier and registration.
            socket.close()
            return events(.disconnected(reason: error.description, retryIn: .zero))
        }
        var backoff = ReconnectBackoff()
        try await session(connection, backoff: &backoff)
    }

    /// The proof of a pairing join: a ticket from the attester when the relay runs attestation,
    /// `{}` in open mode (the relay answers `/attest` with 400 `attestation disabled`).
    private func pairingProof(_ room: RelayRoom) async throws(CompanionError) -> JoinProof {
        guard let attester else { return .park }
        let calls = RelayCalls(room: room, loop: context.loop, tls: context.tls)
        do {
            let challenge = try await calls.challenge()
            let hash = AttestClientData.hash(challenge: (try? Base64.decodeForgiving(challenge)) ?? [], origin: room.origin)
            let object: [UInt8]
            do { object = try await attester.attest(clientDataHash: hash) } catch { throw CompanionError.attestation("\(error)") }
            return .ticket(try await calls.attest(challenge: challenge, attestationObject: object))
        } catch let error as RelayCallError {
            if case .refused(400, "attestation disabled") = error { return .park }
            throw .calls(error)
        } catch let error as CompanionError {
            throw error
        } catch {
            throw .attestation("\(error)")
        }
    }

    // MARK: Every connection

    /// Handshake (pinned Mac key from the link), then the setup messages.
    private func establish(_ socket: AdmittedSocket, room: RelayRoom, link: PairingLink, key: X25519.PrivateKey, secret: RoomSecret,
                           deadline: Duration) async throws(CompanionError) -> CompanionConnection {
        do throws(CompanionError) {
            let channel = try await withDeadline(after: deadline, onTimeout: .timedOut("the secure handshake")) { () throws(CompanionError) in
                try await Self.initiate(socket, key: key, link: link)
            }
            return try await setUp(channel, socket: socket, room: room, link: link, secret: secret)
        } catch {
            socket.close()
            throw error
        }
    }

    /// Courier the room secret (request 1), register after the ack if not yet done, `hello`
    /// (request 2); `pushStatus` follows as the greeting (client.md §12.4–§12.6).
    private func setUp(_ channel: SecureChannel, socket: AdmittedSocket, room: RelayRoom, link: PairingLink,
                       secret: RoomSecret) async throws(CompanionError) -> CompanionConnection {
        try await withDeadline(after: .seconds(15), onTimeout: .timedOut("the Mac's acknowledgement")) { () throws(CompanionError) in
            try await CompanionSession.courierRoomSecret(channel, secret, requestID: 1)
        }
        if state.registeredRoom != room.name.hex, let token = socket.registrationToken {
            try await register(room, token: token, secret: secret)
            do { try state.markRegistered(room.name) } catch { throw .state(error) }
        }
        try await withDeadline(after: .seconds(15), onTimeout: .timedOut("the Mac's hello")) { () throws(CompanionError) in
            try await CompanionSession.helloFromPhone(channel, requestID: 2)
        }
        // The configured pushStatus follows as the session's greeting, read when the session
        // becomes current: a change made before then would otherwise reach no session.
        return CompanionConnection(role: .phone, channel: channel, socket: socket)
    }

    /// `/register`: with an assertion from the attested key when there is an attester and the
    /// relay wants one (`assertion required`), plainly otherwise.
    private func register(_ room: RelayRoom, token: String, secret: RoomSecret) async throws(CompanionError) {
        let calls = RelayCalls(room: room, loop: context.loop, tls: context.tls)
        do {
            try await calls.register(registrationToken: token, verifier: secret.verifier)
        } catch .refused(403, "assertion required") {
            guard let attester else { throw .calls(.refused(status: 403, error: "assertion required")) }
            do {
                let challenge = try await calls.challenge()
                let hash = AttestClientData.hash(challenge: (try? Base64.decodeForgiving(challenge)) ?? [], origin: room.origin)
                let assertion: [UInt8]
                do { assertion = try await attester.assert(clientDataHash: hash) } catch { throw CompanionError.attestation("\(error)") }
                try await calls.register(registrationToken: token, verifier: secret.verifier, challenge: challenge, assertion: assertion)
            } catch let error as RelayCallError {
                throw .calls(error)
            } catch let error as CompanionError {
                throw error
            } catch {
                throw .attestation("\(error)")
            }
        } catch {
            throw .calls(error)
        }
    }

    /// Serves one session; after a relay close the phone waits as the close class says.
    private func session(_ connection: CompanionConnection, backoff: inout ReconnectBackoff) async throws(CompanionError) {
        // Requests 1 and 2 were the courier and hello.
        let pinging = connection.startPinging(every: pingInterval, timeout: pongTimeout, firstRequestID: 3, clock: context.clock)
        defer { pinging.cancel() }
        var local = backoff
        _ = try await serveSession(connection) { EndpointContext.retryDelay(after: $0, backoff: &local) ?? .zero }
        backoff = local
    }

    /// How long after following its room to a new owner the phone retries `mac offline` every
    /// `macCatchUpDelay` instead of backing off: both ends lost the same node and raced to the new
    /// owner, and the Mac parks there a moment after the phone when it loses the race.
    static let macCatchUpWindow: Duration = .seconds(5)
    static let macCatchUpDelay: Duration = .milliseconds(500)

    private func wait(after error: CompanionError, backoff: inout ReconnectBackoff, movedAt: inout ContinuousClock.Instant?,
                      watching resolver: RelayResolver, _ name: RoomName) async throws(CompanionError) {
        if case let .relay(.refused(reason)) = error, reason == "ticket required" {
            // Attestation mode asks a signed phone for a ticket only when the room is no longer
            // established: it was deleted or reaped.
            throw .needsRepairing(reason)
        }
        if case let .relay(.closed(_, reason)) = error { try checkRoomExists(closeReason: reason) }
        let catchingUp = movedAt.map { context.clock.now - $0 < Self.macCatchUpWindow } ?? false
        if catchingUp, case .relay(.refused("mac offline")) = error {
            events(.disconnected(reason: error.description, retryIn: Self.macCatchUpDelay))
            return await context.pause(Self.macCatchUpDelay)
        }
        guard let delay = EndpointContext.retryDelay(after: error.signal, backoff: &backoff) else { throw error }
        events(.disconnected(reason: error.description, retryIn: delay))
        if await context.pause(delay, watching: resolver, name) {
            backoff.reset()
            movedAt = context.clock.now
        }
    }

    // MARK: Plumbing

    private func staticKey() throws(CompanionError) -> X25519.PrivateKey {
        do { return try state.staticKey() } catch { throw .state(error) }
    }

    private func storedPairing() throws(CompanionError) -> (PairingLink, RoomSecret)? {
        do {
            guard let stored = try state.phonePairing(), let secret = try state.roomSecret() else { return nil }
            // Revision 11: a direct pairing on the official relay moves to the official
            // resolver, same key and pid, so the same room (client.md §2.6).
            let link = stored.migratedToResolver()
            if link != stored { try state.storePhonePairing(link) }
            return (link, secret)
        } catch { throw .state(error) }
    }

    private static func initiate(_ socket: AdmittedSocket, key: X25519.PrivateKey, link: PairingLink) async throws(CompanionError) -> SecureChannel {
        do {
            let macKey = try X25519.PublicKey(rawRepresentation: link.responderStaticKey)
            return try await SecureChannel.initiate(over: socket, staticKey: key, responderStaticKey: macKey, pairingID: link.pairingID)
        } catch let error as SecureChannelError {
            throw .channel(error)
        } catch {
            throw .channel(.handshakeFailed("\(error)"))
        }
    }

    /// Unpairs: tells a connected Mac (`unpairing`), deletes the room on the relay, wipes the
    /// pairing. Works without a running session too.
    public func unpair() async throws(CompanionError) {
        outbox.current?.sayFarewell()
        try await Self.unpair(context: context)
    }

    /// Unpairs the phone whose pairing `context`'s state directory holds, with no endpoint running:
    /// deletes the room on the relay (a signed `/delete`), then forgets the pairing. A relay that
    /// cannot be reached leaves the pairing in place, so the user can try again.
    public static func unpair(context: EndpointContext) async throws(CompanionError) {
        let link: PairingLink?
        let secret: RoomSecret?
        do {
            link = try context.state.phonePairing()
            secret = try context.state.roomSecret()
        } catch { throw .state(error) }
        guard let link else { throw .notPaired }
        try await context.unpair(transport: link.transport, name: link.roomName, secret: secret)
    }
}
