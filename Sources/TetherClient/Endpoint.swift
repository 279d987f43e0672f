import Foundation
public import TetherNet
public import TetherWire
public import TetherDevice
import TetherSync

/// What an endpoint tells its user interface, in order. Both roles use one vocabulary.
public enum EndpointEvent: Sendable, Equatable {
    /// Mac: show this pairing link (and its QR code); it replaces any earlier one.
    case pairingLink(PairingLink)
    /// Mac: parked in the room, waiting for the phone.
    case waitingForPeer
    /// Phone: the relay this pairing goes through (origin), and the host to disclose when it
    /// is not the official one (punycode for non-ASCII labels).
    case relay(origin: String, disclosedHost: String?)
    /// Mac: a phone finished the handshake; the code it shows must be typed now.
    case enterCode
    /// Mac: a wrong code; `attemptsLeft` more may be tried.
    case wrongCode(attemptsLeft: Int)
    /// Phone: show this six-digit code until the Mac decides.
    case showCode(String)
    /// Phone: the code is void (the connection dropped or the verdict came); stop showing it.
    case codeWithdrawn
    /// A pairing ended without success and a new attempt starts (the reason).
    case pairingRestarted(String)
    /// The pairing was confirmed and stored.
    case paired
    /// An end-to-end session is up (after pairing or a reconnect).
    case connected
    /// An application frame from the other device.
    case message([UInt8])
    /// The session or an attempt ended; the next attempt follows in `retryIn` seconds.
    case disconnected(reason: String, retryIn: Duration)
}

/// The pieces both endpoints share: where to connect from, the state directory, the event sink,
/// the outgoing-message queue, and the session pump.
public struct EndpointContext: Sendable {
    /// The event loop the endpoint's sockets and timers run on.
    public let loop: EventLoop
    /// TLS settings for `https://` relays and resolvers (nil: the system's trust store).
    public let tls: TLSClientContext?
    /// Where the device's static key and its pairing are kept between runs.
    public let state: StateDirectory
    /// Receives every ``EndpointEvent``, in order, on whichever thread the endpoint runs; hand it
    /// to your user interface's own queue.
    public let events: @Sendable (EndpointEvent) -> Void
    /// Every wait, deadline and expiry of the endpoint runs on this clock.
    public let clock: any DeviceClock
    /// The socket joined last (a park or a session's), for a stopping command to close.
    let lastJoined = LastJoinedSocket()
    /// The frames the endpoint sends, held until a session is up.
    let outbox = Outbox()

    /// Gathers what an endpoint needs. `clock` is for tests, which move time by hand.
    public init(loop: EventLoop, tls: TLSClientContext? = nil, state: StateDirectory, clock: any DeviceClock = SystemDeviceClock(),
                events: @escaping @Sendable (EndpointEvent) -> Void) {
        self.loop = loop
        self.tls = tls
        self.state = state
        self.clock = clock
        self.events = events
    }
}

/// Application frames to send: delivered at once while a session is up, held (in order) while
/// there is none and delivered when the next session starts.
final class Outbox: Sendable {
    private struct Held {
        var pending: [[UInt8]] = []
        var connection: CompanionConnection?
    }

    private let held = Locked(Held())

    // Sending only queues the frame on the socket's loop, so it happens under the lock: frames
    // leave in the order they were given even while a session is being attached.
    func send(_ frame: [UInt8]) {
        held.withLock { held in
            if let connection = held.connection, (try? connection.send(frame)) != nil { return }
            held.pending.append(frame)
        }
    }

    /// `greeting` is read and sent first, under the lock once `live` is current, so a value it
    /// reads that changes a moment later is either read new here or sent by its setter on `live`.
    func attach(_ live: CompanionConnection, greeting: () -> [UInt8]? = { nil }) {
        held.withLock { held in
            held.connection = live
            if let first = greeting() { try? live.send(first) }
            for frame in held.pending { try? live.send(frame) }
            held.pending = []
        }
    }

    func detach() { held.withLock { $0.connection = nil } }

    var current: CompanionConnection? { held.withLock { $0.connection } }
}

/// How a session ended.
enum SessionEnd: Sendable {
    case closed(code: UInt16, reason: String)
    case failed(CompanionError)
    case peerUnpaired
}

extension EndpointContext {
    /// Delivers frames from the session until it ends; outgoing frames flow through `outbox`.
    func serve(_ connection: CompanionConnection, outbox: Outbox, greeting: () -> [UInt8]? = { nil },
               pushStatus: (PushStatus) -> Void = { _ in }) async -> SessionEnd {
        outbox.attach(connection, greeting: greeting)
        defer { outbox.detach() }
        while true {
            do throws(CompanionError) {
                guard let incoming = try await connection.receive() else {
                    let close = await connection.socket.ended()
                    return .closed(code: close.code, reason: close.reason)
                }
                switch incoming {
                case let .message(frame): events(.message(frame))
                case let .pushStatus(status): pushStatus(status)
                case .peerUnpaired:
                    connection.close()
                    return .peerUnpaired
                }
            } catch {
                return .failed(error)
            }
        }
    }

    /// Sleeps `duration` (returns early only when the task is cancelled).
    func pause(_ duration: Duration) async {
        await clock.sleep(for: duration)
    }

    /// How often a waiting v2 client refetches the map during the first `mapWatchFast` of
    /// a wait, and how far apart later fetches may grow: a node that died sends no 4421, and its
    /// rooms move to a survivor when its lease lapses (relay.md §8, 10 s by default). Watching the
    /// map each second puts the client back within about a second of that, where a back-off alone
    /// retried after 16 s or more; the interval grows after the first half-minute, so a relay that
    /// is down altogether is not polled every second by every client for as long as it is down.
    static let mapWatchInterval: Duration = .seconds(1)
    static let mapWatchFast: Duration = .seconds(30)
    static let mapWatchLongest: Duration = .seconds(15)

    /// Sleeps `duration`, but on a v2 link (a shard map) refetches the map meanwhile and returns as
    /// soon as it names another owner for the room than when the wait began: the client then
    /// reconnects to the new owner at once instead of at the end of its back-off. True when it
    /// returned for that reason: the caller starts its back-off over, since failures before the
    /// move said nothing about the new owner.
    @discardableResult
    func pause(_ duration: Duration, watching resolver: RelayResolver, _ name: RoomName) async -> Bool {
        guard case .resolved = resolver.transport, duration > Self.mapWatchInterval,
              let before = try? await resolver.origin(for: name) else {
            await pause(duration)
            return false
        }
        let start = clock.now
        var interval = Self.mapWatchInterval
        while !Task.isCancelled {
            let elapsed = clock.now - start
            guard elapsed < duration else { return false }
            // Jitter spreads the fetches of every client that lost the same node at once.
            await pause(min(duration - elapsed, interval * Double.random(in: 1...1.5)))
            if let owner = try? await resolver.origin(for: name, forceFresh: true), owner != before { return true }
            if clock.now - start >= Self.mapWatchFast { interval = min(Self.mapWatchLongest, interval * 1.5) }
        }
        return false
    }


    /// The delay before the next attempt after `error`, or nil if retrying cannot help.
    static func retryDelay(after signal: RelaySignal, backoff: inout ReconnectBackoff) -> Duration? {
        switch signal {
        case .fatal: nil
        case .reResolve: backoff.nextAfterReResolve()
        case .displaced, .quotaExceeded: signal.fixedDelay
        case .transient: backoff.next()
        }
    }

    /// Unpair (client.md §12.6): a signed `/delete` for the room (403 `not established` counts
    /// as done), then the local pairing is wiped. A relay that cannot be reached leaves the
    /// pairing in place, so the user can try again.
    func unpair(transport: PairingLink.Transport, name: RoomName, secret: RoomSecret?) async throws(CompanionError) {
        if let secret {
            let origin = try await resolve(RelayResolver(transport: transport, loop: loop, tls: tls), name, force: true)
            do { try await RelayCalls(room: RelayRoom(origin: origin, name: name), loop: loop, tls: tls).delete(roomSecret: secret) }
            catch { throw .calls(error) }
        }
        state.wipePairing()
    }

    func resolve(_ resolver: RelayResolver, _ name: RoomName, force: Bool) async throws(CompanionError) -> String {
        do { return try await resolver.origin(for: name, forceFresh: force) } catch { throw .resolve(error) }
    }

    func join(_ room: RelayRoom, role: RelayRole, proof: JoinProof) async throws(CompanionError) -> AdmittedSocket {
        do {
            let socket = try await RelayAdmission.join(room, role: role, proof: proof, on: loop, tls: tls)
            lastJoined.set(socket)
            return socket
        } catch {
            if case .signed = proof, error == .refused("bad signature") { throw .signatureRefused(origin: room.origin) }
            throw .relay(error)
        }
    }
}

/// The socket an endpoint joined last.
final class LastJoinedSocket: Sendable {
    private let held = Locked<AdmittedSocket?>(nil)

    var socket: AdmittedSocket? { held.withLock { $0 } }

    func set(_ socket: AdmittedSocket) { held.withLock { $0 = socket } }
}

/// A Mac or a phone endpoint: what an app (or the `tether` command) drives either through. Both
/// keep everything that changes in their context (the outgoing frames, the socket joined last),
/// so the operations below are the same for both.
public protocol CompanionEndpoint: AnyObject, Sendable {
    /// The loop, state directory, event sink and outgoing queue the endpoint runs with.
    var context: EndpointContext { get }
}

extension CompanionEndpoint {
    /// Sends an application frame to the other device (held until a session is up).
    public func send(_ frame: [UInt8]) { context.outbox.send(frame) }

    /// Closes the current session, if any (the process is about to end).
    public func closeSession() { context.outbox.current?.close() }

    /// The socket the endpoint joined last, parked or in a session (nil before the first join).
    /// A stopping command takes it, then cancels the endpoint's task (so it does not join again),
    /// then closes it and waits for its end.
    public var heldSocket: AdmittedSocket? { context.lastJoined.socket }
}

/// What differs between the roles while a session is served, and how a session is served and
/// how its end is read (client.md §14), shared by both.
protocol EndpointRole: CompanionEndpoint {
    /// The frame a session starts with, before anything queued (the phone's `pushStatus`).
    func greeting() -> [UInt8]?
    /// The phone's `pushStatus` arrived (the Mac keeps it).
    func received(_ status: PushStatus)
}

extension EndpointRole {
    func greeting() -> [UInt8]? { nil }
    func received(_ status: PushStatus) {}

    var outbox: Outbox { context.outbox }
    var events: @Sendable (EndpointEvent) -> Void { context.events }
    var state: StateDirectory { context.state }

    /// Runs `body` with a time limit on the endpoint's clock (see `racingDeadline`).
    func withDeadline<T: Sendable>(after limit: Duration, onTimeout: CompanionError,
                                   _ body: @escaping @Sendable () async throws(CompanionError) -> T) async throws(CompanionError) -> T {
        try await racingDeadline(clock: context.clock, after: limit, onTimeout: onTimeout, body)
    }

    /// Serves one session until it ends, waits as its end says (`delay` picks the wait for a
    /// relay close), and returns what the relay's close signalled. The other device's farewell
    /// or a deleted room end the pairing (thrown).
    func serveSession(_ connection: CompanionConnection, delay: (RelaySignal) -> Duration) async throws(CompanionError) -> RelaySignal {
        events(.connected)
        switch await context.serve(connection, outbox: outbox, greeting: { greeting() }, pushStatus: { received($0) }) {
        case .peerUnpaired:
            state.wipePairing()
            throw .unpairedByPeer
        case let .closed(code, reason):
            try checkRoomExists(closeReason: reason)
            let signal = RelaySignal.close(code: code, reason: reason)
            let wait = delay(signal)
            events(.disconnected(reason: "relay closed the connection (\(code)\(reason.isEmpty ? "" : " \(reason)"))", retryIn: wait))
            await context.pause(wait)
            return signal
        case let .failed(error):
            // An AEAD failure tears the channel down; a fresh handshake follows at once (§9.6).
            connection.close()
            events(.disconnected(reason: error.description, retryIn: .zero))
            return .transient
        }
    }

    /// A relay close saying the room is gone (relay.md's `room deleted` after a signed delete,
    /// `room expired` after the idle TTL) ends the pairing: retrying cannot bring it back, so it
    /// is forgotten and the caller hears it needs re-pairing.
    func checkRoomExists(closeReason reason: String) throws(CompanionError) {
        guard reason == "room deleted" || reason == "room expired" else { return }
        state.wipePairing()
        throw .needsRepairing(reason)
    }
}
