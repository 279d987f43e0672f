public import TetherWire
import TetherCrypto
import TetherService

/// A connection's identity inside a room; assigned by the I/O layer in connect order.
public struct SocketID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: SocketID, b: SocketID) -> Bool { a.raw < b.raw }
    public var description: String { "#\(raw)" }
}

/// What a room asks its I/O layer to do, in order.
public enum RoomAction: Equatable, Sendable {
    /// Send a control message as a text frame.
    case send(SocketID, String)
    /// Forward the frame being handled, unchanged, to this socket.
    case forward(to: SocketID)
    /// Close with this code and reason (the room already treats the socket as gone).
    case close(SocketID, code: UInt16, reason: String)
    /// An always-on, zero-PII lifecycle line (room tag, never the name, an IP or a key).
    case log(String)
}

/// One room's admission and splice rules (relay.md §3), as a pure state machine: events in,
/// actions out, time passed in, storage through `RoomStore`. No sockets, so every rule is tested
/// without them; the relay's I/O layer performs the actions.
public struct RoomMachine {
    public struct Configuration: Sendable {
        public var origin: String
        public var attestationRequired: Bool
        public var preAuthCap = 4
        public var admissionDeadlineMs: UInt64 = 15_000
        public var admissionLimit = 40
        public var admissionWindowMs: UInt64 = 10_000
        public var pairingCycleCap = 8
        public var tokenTTLms: UInt64 = 300_000
        public var preAuthFrameCap = 8_192
        public var admittedFrameCap = 262_144
        /// Spliced frames per room per second (0 = off).
        public var maxFramesPerSecond = 500
        /// Bytes a room may relay per 24 hours (§3.12).
        public var dailyByteQuota: Int64 = 536_870_912
        /// The quota record is persisted after this many more bytes (and on roll-over and trips).
        public var quotaFlushStep: Int64 = 4_194_304

        public init(origin: String, attestationRequired: Bool) {
            self.origin = origin
            self.attestationRequired = attestationRequired
        }
    }

    enum State: Equatable {
        case hello
        case challenged(nonce: [UInt8], hello: Hello)
        case admitted(RelayRole)
    }

    struct Socket {
        var state: State
        let connectedAt: UInt64
    }

    /// What every room of a relay shares: held once, referenced by each machine, so a resident
    /// room costs its own state only.
    public final class Context: @unchecked Sendable {
        public let configuration: Configuration
        let store: any RoomStore
        let random: (Int) -> [UInt8]

        /// - Parameter random: the source of nonces and tokens; nil means the CSPRNG (tests fix it).
        public init(configuration: Configuration, store: any RoomStore, random: ((Int) -> [UInt8])? = nil) {
            self.configuration = configuration
            self.store = store
            self.random = random ?? { SecureRandom.bytes($0) }
        }
    }

    public let room: RoomName
    /// The room's name at rest and in the log (computed once: every store call and log line uses it).
    public let key: RoomKey
    private let context: Context
    public var configuration: Configuration { context.configuration }
    private var store: any RoomStore { context.store }
    private func random(_ count: Int) -> [UInt8] { context.random(count) }
    private var sockets = SmallMap<SocketID, Socket>()
    /// Sockets this machine closed, until their disconnect: what they were, for the log line.
    private var closing = SmallMap<SocketID, State>()
    private var admissionWindow: FixedWindow
    /// The splice's counters, made at the first admitted frame: a parked mac never needs them.
    private var splice: Splice?

    private final class Splice {
        var frameWindow: FixedWindow
        /// The 24-hour byte count, once loaded or started (§3.12).
        var quota: QuotaRecord?
        var quotaPersistedBytes: Int64 = 0

        init(maxFramesPerSecond: Int) { frameWindow = FixedWindow(limit: maxFramesPerSecond, window: 1_000) }
    }
    /// A pairing-mode phone admission charged the stored cycle count during this mac park.
    private var chargedCycles = false

    public init(room: RoomName, context: Context) {
        self.room = room
        key = RoomKey(room)
        self.context = context
        admissionWindow = FixedWindow(limit: context.configuration.admissionLimit, window: context.configuration.admissionWindowMs)
    }

    /// A machine with a context of its own (tests).
    public init(room: RoomName, configuration: Configuration, store: any RoomStore,
                            random: ((Int) -> [UInt8])? = nil) {
        self.init(room: room, context: Context(configuration: configuration, store: store, random: random))
    }

    /// Sockets the room still counts (pre-auth and admitted).
    public var socketCount: Int { sockets.count }
    public var isEmpty: Bool { sockets.isEmpty }

    /// The socket admitted with `role`, if any.
    public func admitted(_ role: RelayRole) -> SocketID? {
        sockets.first { $0.value.state == .admitted(role) }?.key
    }

    /// The socket's admission state as the disconnect log names it (relay.md §9.1).
    public func stateName(of id: SocketID) -> String {
        switch sockets[id]?.state ?? closing[id] {
        case .hello?: "hello"
        case .challenged?: "challenged"
        case .admitted?: "admitted"
        case nil: "?"
        }
    }

    /// The role a socket is admitted as or has claimed in its Hello; nil before any Hello.
    public func role(of id: SocketID) -> RelayRole? {
        switch sockets[id]?.state ?? closing[id] {
        case let .admitted(role)?: role
        case let .challenged(_, hello)?: hello.role
        default: nil
        }
    }

    public func isAdmitted(_ id: SocketID) -> Bool {
        if case .admitted? = sockets[id]?.state { return true }
        return false
    }

    // MARK: Events

    /// A socket was upgraded into this room (§2.3, §3.9): it waits for a Hello; the pre-auth cap
    /// evicts the oldest pending sockets.
    public mutating func connected(_ id: SocketID, now: UInt64) -> [RoomAction] {
        sockets[id] = Socket(state: .hello, connectedAt: now)
        var actions: [RoomAction] = [.log("relay \(key.logTag) connect")]
        let pending = sockets.filter { if case .admitted = $0.value.state { return false } else { return true } }
            .sorted { ($0.value.connectedAt, $0.key) < ($1.value.connectedAt, $1.key) }
        for (victim, _) in pending.prefix(max(0, pending.count - configuration.preAuthCap)) {
            actions += close(victim, 1008, "too many pending")
        }
        return actions
    }

    /// A frame from a socket. `isText` and `payload` as received; `utf16Count` is the frame's
    /// size for the caps when it is text (relay.md measures text in UTF-16 code units).
    public mutating func frame(from id: SocketID, isText: Bool, payload: [UInt8], now: UInt64) -> [RoomAction] {
        guard let socket = sockets[id] else { return [] }   // closing or gone: dropped
        let size = isText ? Self.utf16Length(ofUTF8: payload) : payload.count
        switch socket.state {
        case .hello:
            guard size <= configuration.preAuthFrameCap else { return close(id, 1009, "frame too large") }
            return hello(id, payload: payload)
        case let .challenged(nonce, hello):
            guard size <= configuration.preAuthFrameCap else { return close(id, 1009, "frame too large") }
            return proof(id, payload: payload, nonce: nonce, hello: hello, now: now)
        case let .admitted(role):
            return data(id, role: role, size: size, now: now)
        }
    }

    /// The I/O layer reports a socket gone that the room did not close itself (the client closed,
    /// a transport error, keepalive). An admitted socket's peer is closed 1001 `peer gone` (§3.13).
    public mutating func disconnected(_ id: SocketID) -> [RoomAction] {
        closing[id] = nil
        guard let socket = sockets.removeValue(forKey: id) else { return [] }
        endParkIfMacGone()
        guard case let .admitted(role) = socket.state, let peer = admitted(role == .mac ? .phone : .mac) else { return [] }
        return close(peer, 1001, "peer gone")
    }

    /// Housekeeping (§3.9): a socket still pre-auth more than the deadline after connecting is
    /// closed 1008 `admission timeout`.
    public mutating func tick(now: UInt64) -> [RoomAction] {
        var actions: [RoomAction] = []
        for (id, socket) in sockets.sorted(by: { $0.key < $1.key }) {
            if case .admitted = socket.state { continue }
            if now &- socket.connectedAt > configuration.admissionDeadlineMs { actions += close(id, 1008, "admission timeout") }
        }
        return actions
    }

    /// The earliest time `tick` has work: the oldest pre-auth socket's deadline.
    public var nextDeadline: UInt64? {
        sockets.values.compactMap { socket -> UInt64? in
            if case .admitted = socket.state { return nil }
            return socket.connectedAt + configuration.admissionDeadlineMs + 1
        }.min()
    }

    /// Closes every socket with one code and reason (delete, expiry, shutdown, quota).
    public mutating func closeAll(code: UInt16, reason: String) -> [RoomAction] {
        sockets.keys.sorted().flatMap { close($0, code, reason) }
    }

    /// A text frame's JavaScript length (§3.11) straight from its UTF-8 (which the WebSocket layer
    /// has validated): one unit per scalar, two for a scalar above U+FFFF (a 4-byte sequence).
    public static func utf16Length(ofUTF8 bytes: [UInt8]) -> Int {
        var count = 0
        for byte in bytes {
            if byte & 0xC0 != 0x80 { count += 1 }
            if byte >= 0xF0 { count += 1 }
        }
        return count
    }

    // MARK: Hello (§3.3)

    private mutating func hello(_ id: SocketID, payload: [UInt8]) -> [RoomAction] {
        guard let hello = Hello.parse(payload) else { return close(id, 1008, "bad hello") }
        let nonce = random(32)
        sockets[id]?.state = .challenged(nonce: nonce, hello: hello)
        return [.send(id, AdmissionReply.challenge(nonce: nonce))]
    }

    // MARK: Proof (§3.4)

    private enum Credential {
        case signed
        case ticket(TicketRecord)
        case parkedMac
        case open

        var log: String {
            switch self {
            case .signed: "signed"
            case .ticket: "ticket"
            case .parkedMac: "park(pre-auth mac)"
            case .open: "open"
            }
        }
    }

    private mutating func proof(_ id: SocketID, payload: [UInt8], nonce: [UInt8], hello: Hello, now: UInt64) -> [RoomAction] {
        guard admissionWindow.hit(now: now) else { return refuse(id, "rate limited") }
        guard let proof = Proof.parse(payload) else { return refuse(id, "bad proof") }
        let credential: Credential
        // One read serves §3.4 and §3.5 ("established" is read once per Proof).
        let stored = store.admissionState(of: key)
        if let verifier = stored.verifier {
            guard let signature = proof.signature else { return refuse(id, "signature required") }
            let transcript = JoinTranscript(role: hello.role, nonce: nonce, room: room, origin: configuration.origin)
            guard let joinKey = (try? Base64.decodeForgiving(verifier)).flatMap({ try? Ed25519.PublicKey(rawRepresentation: $0) }),
                  let signatureBytes = try? Base64.decodeForgiving(signature),
                  joinKey.isValidSignature(signatureBytes, for: transcript.bytes) else { return refuse(id, "bad signature") }
            // Refreshed before the slot checks, so even a refused join keeps the room alive.
            store.touch(key, at: now)
            credential = .signed
        } else if configuration.attestationRequired {
            if hello.role == .mac {
                credential = .parkedMac
            } else {
                guard let ticket = proof.ticket else { return refuse(id, "ticket required") }
                // Consumed here, before the slot checks: a phone refused below must re-attest.
                guard let record = store.consumeTicket(ticket, in: key, now: now) else { return refuse(id, "bad ticket") }
                credential = .ticket(record)
            }
        } else {
            credential = .open
        }
        return admit(id, hello: hello, credential: credential, stored: stored, now: now)
    }

    // MARK: Slot admission (§3.5)

    private mutating func admit(_ id: SocketID, hello: Hello, credential: Credential, stored: AdmissionState, now: UInt64) -> [RoomAction] {
        let established = stored.verifier != nil
        let role = hello.role
        // A count of 0 is already what a reset writes; skipping it spares a write per park.
        if !established, role == .mac, stored.pairingCycles != 0 { store.setPairingCycles(0, of: key) }
        if role == .phone {
            guard let mac = admitted(.mac), mac != id else { return refuse(id, "mac offline") }
            if !established {
                let cycles = stored.pairingCycles + 1
                if cycles > configuration.pairingCycleCap {
                    store.deleteRoom(key)
                    return [.log("relay \(key.logTag) teardown reason=pairing cycle cap")] + closeAll(code: 1000, reason: "pairing cycle cap")
                }
                store.setPairingCycles(cycles, of: key)
                chargedCycles = true
            }
        }
        var actions: [RoomAction] = []
        if let incumbent = admitted(role), incumbent != id {
            if hello.nonDisplacing { return refuse(id, "slot occupied") }
            // Newest wins; the incumbent's peer stays and is re-spliced to this socket.
            actions += close(incumbent, 1000, "displaced")
        }
        sockets[id]?.state = .admitted(role)
        let peer = admitted(role == .mac ? .phone : .mac) != nil
        actions.append(.log("relay \(key.logTag) admit role=\(role.rawValue) via=\(credential.log) peer=\(peer)\(peer ? " (spliced)" : "")"))
        if role == .phone {
            let token = Base64.encode(random(24))
            var keyID: String?
            var publicKey: String?
            if case let .ticket(record) = credential {
                keyID = record.keyID
                publicKey = record.publicKey
            }
            store.putRegistrationToken(token, RegistrationTokenRecord(expiresAt: now + configuration.tokenTTLms,
                                                                      attestKeyID: keyID, attestPublicKey: publicKey), in: key)
            actions.append(.send(id, AdmissionReply.admitted(registrationToken: token)))
        } else {
            actions.append(.send(id, AdmissionReply.admitted()))
        }
        return actions
    }

    // MARK: Splice (§3.11, §3.12)

    private mutating func data(_ id: SocketID, role: RelayRole, size: Int, now: UInt64) -> [RoomAction] {
        let peer = admitted(role == .mac ? .phone : .mac)
        guard size <= configuration.admittedFrameCap else {
            return (peer.map { close($0, 1001, "peer gone") } ?? []) + close(id, 1009, "frame too large")
        }
        let splice = self.splice ?? {
            let splice = Splice(maxFramesPerSecond: configuration.maxFramesPerSecond)
            self.splice = splice
            return splice
        }()
        guard splice.frameWindow.hit(now: now) else {
            return (peer.map { close($0, 1001, "peer gone") } ?? []) + close(id, 1008, "frame rate exceeded")
        }
        guard chargeQuota(size, now: now, splice) else {
            return [.log("relay \(key.logTag) quota exceeded")] + closeAll(code: 1008, reason: "daily quota exceeded")
        }
        // No peer yet: dropped silently (it still counted toward the rate and the quota).
        return peer.map { [.forward(to: $0)] } ?? []
    }

    /// Adds `size` to the room's 24-hour byte count (§3.12); false when that trips the quota.
    /// The record is persisted on roll-over, on a trip, and after each further flush step.
    private func chargeQuota(_ size: Int, now: UInt64, _ splice: Splice) -> Bool {
        var record = splice.quota ?? store.quota(of: key) ?? QuotaRecord(dayStart: now, bytes: 0)
        if splice.quota == nil { splice.quotaPersistedBytes = record.bytes }
        if now &- record.dayStart >= QuotaRecord.window {
            record = QuotaRecord(dayStart: now, bytes: 0)
            store.setQuota(record, of: key)
            splice.quotaPersistedBytes = 0
        }
        record.bytes += Int64(size)
        splice.quota = record
        if record.bytes > configuration.dailyByteQuota {
            store.setQuota(record, of: key)
            splice.quotaPersistedBytes = record.bytes
            return false
        }
        if record.bytes - splice.quotaPersistedBytes >= configuration.quotaFlushStep {
            store.setQuota(record, of: key)
            splice.quotaPersistedBytes = record.bytes
        }
        return true
    }

    // MARK: Helpers

    private mutating func refuse(_ id: SocketID, _ reason: String) -> [RoomAction] {
        [.send(id, AdmissionReply.refused(reason))] + close(id, 1008, reason)
    }

    /// Closes `id` and forgets it at once: frames it sends meanwhile are dropped (§3.1 Tether),
    /// and its going away never propagates to a peer.
    private mutating func close(_ id: SocketID, _ code: UInt16, _ reason: String) -> [RoomAction] {
        guard let socket = sockets.removeValue(forKey: id) else { return [] }
        closing[id] = socket.state
        endParkIfMacGone()
        return [.close(id, code: code, reason: reason)]
    }

    /// §6.10 (Tether): the cycle count matters only while a mac is parked, and the next park
    /// resets it, so once no mac is admitted the stored count goes — a pairing that never
    /// completes leaves nothing behind.
    private mutating func endParkIfMacGone() {
        guard chargedCycles, admitted(.mac) == nil else { return }
        chargedCycles = false
        store.setPairingCycles(0, of: key)
    }
}
