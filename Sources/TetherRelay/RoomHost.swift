import TetherNet
import TetherStore
import TetherWire
import TetherSync

/// One resident room: its machine, its sockets, and the actions performed on them. The host is
/// the delegate of each of its WebSockets; a socket's entry is a value in the host's map rather
/// than an object of its own, since every parked connection pays for whatever lives here.
final class RoomHost: WebSocketDelegate {
    /// One WebSocket of the room.
    struct Member {
        var connection: WebSocketConnection?
        let ip: String
        /// Monotonic ms.
        let openedAt: MonotonicInstant
        /// Why reading is paused (`Hold` bits); read again when none is left.
        var holds: UInt8 = 0
        /// The close the relay started, if it did (for the disconnect line); out of line, as
        /// only a socket being closed has one.
        var closedByRelayStorage = OutOfLine<(code: UInt16, reason: String)>()
        var closedByRelay: (code: UInt16, reason: String)? {
            get { closedByRelayStorage.value }
            set { closedByRelayStorage.value = newValue }
        }
    }

    /// Reasons a member's reading is paused.
    enum Hold {
        /// Its frames wait behind the room's storage answer.
        static let storage: UInt8 = 1
        /// Its peer has not taken what it already sent (back-pressure).
        static let peer: UInt8 = 2
    }

    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    /// Inline, not an object of its own: one allocation less per resident room.
    @exclusivity(unchecked) var machine: RoomMachine
    unowned let table: RoomTable
    @exclusivity(unchecked) private var members = SmallMap<SocketID, Member>()
    /// The admission deadline's timer and when it fires: out of line, since only a room with a
    /// pending socket has one.
    @exclusivity(unchecked) private var deadlineTimerStorage = OutOfLine<(timer: EventLoop.TimerID, at: MonotonicInstant)>()
    private var deadlineTimer: EventLoop.TimerID? { deadlineTimerStorage.value?.timer }

    var loop: EventLoop { table.loop }

    /// The relay outlives every room it hosts.
    private var server: RelayServer { table.server! }

    init(machine: RoomMachine, table: RoomTable) {
        self.machine = machine
        self.table = table
    }

    func adopt(_ transport: any Transport, id: SocketID, leftover: [UInt8], ip: String, connectedAt: MonotonicInstant) {
        table.assertOnLoop()
        // The member holds its connection before the room acts on it, so what the room answers
        // (a too-many-pending close, a Hello's challenge for a frame that came with the upgrade
        // request) reaches the socket (relay.md §2.3: no early frame is lost).
        let connection = WebSocketConnection(connection: transport, role: .server, options: server.webSocketOptions, delegate: self)
        members[id] = Member(connection: connection, ip: ip, openedAt: connectedAt)
        perform(machine.connected(id, now: connectedAt))
        if !leftover.isEmpty { leftover.withUnsafeBytes { connection.transport(transport, didRead: $0) } }
        armDeadline()
    }

    private func id(of socket: WebSocketConnection) -> SocketID? {
        members.first { $0.value.connection === socket }?.key
    }

    // MARK: WebSocketDelegate

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        table.assertOnLoop()
        if let id = id(of: socket) { frame(from: id, isText: true, payload: text) }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        table.assertOnLoop()
        if let id = id(of: socket) { frame(from: id, isText: false, payload: data) }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        table.assertOnLoop()
        guard let id = id(of: socket) else { return }
        members[id]?.connection = nil
        gone(id, code: code, reason: reason, failedWithProtocolError: socket.failedWithProtocolError)
    }

    /// Back-pressure (relay.md §3.11, Tether): a socket whose queue passed the high-water mark
    /// holds back its peer, which the splice stops reading as it forwards (the socket itself is not
    /// read past the chassis' 1 MiB read limit); once it drains below the low-water mark its peer
    /// is read again.
    func webSocketWritabilityChanged(_ socket: WebSocketConnection) {
        table.assertOnLoop()
        guard socket.isWritable, let id = id(of: socket) else { return }
        releaseHolds(Hold.peer, except: id)
    }

    /// Above the high-water mark for `RELAY_STALL_TIMEOUT_MS`: closed 1008 `write stalled`, by the
    /// machine's rule (an admitted socket's peer stays admitted).
    func webSocketDidStall(_ socket: WebSocketConnection) {
        table.assertOnLoop()
        guard let id = id(of: socket) else { return }
        perform(machine.stalled(id))
        armDeadline()
    }

    // MARK: Events

    private func frame(from id: SocketID, isText: Bool, payload: [UInt8]) {
        switch machine.receive(from: id, isText: isText, payload: payload, now: table.clock.roomTime()) {
        case let .forward(target): forward(payload, isText: isText, from: id, to: target)
        case .none: return
        case let .actions(actions):
            // In the machine's order; a forward among them is this frame's.
            for action in actions {
                if case let .forward(target) = action { forward(payload, isText: isText, from: id, to: target) } else { perform(action) }
            }
            armDeadline()
        }
    }

    /// The splice: the frame goes out unchanged; if that leaves the target above its high-water
    /// mark, the sender is not read again until the target drains.
    private func forward(_ payload: [UInt8], isText: Bool, from id: SocketID, to target: SocketID) {
        guard let out = members[target]?.connection else { return }
        if isText { out.send(text: payload) } else { out.send(binary: payload) }
        if !out.isWritable { hold(id, Hold.peer) }
    }

    private func gone(_ id: SocketID, code: UInt16, reason: String, failedWithProtocolError: Bool) {
        guard let member = members.removeValue(forKey: id) else { return }
        server.release(member.ip)
        let lived = table.clock.monotonic().elapsed(since: member.openedAt)
        server.metrics.socketLifetime(lived)
        let tag = machine.key.logTag, role = machine.role(of: id)?.rawValue ?? "?"
        let keepaliveTimeout = code == WebSocketCloseCode.abnormal && reason == WebSocketConnection.keepaliveTimeoutReason
        if keepaliveTimeout {
            server.metrics.keepaliveTermination()
            server.write("relay \(tag) keepalive no-pong; terminating role=\(role) lived=\(lived.millisecondsClamped)ms")
        }
        server.metrics.socketEnded(member.closedByRelay.map { .relay(reason: $0.reason) }
            ?? (keepaliveTimeout ? .keepaliveTimeout : failedWithProtocolError ? .protocolError
                : code == WebSocketCloseCode.abnormal ? .connectionLost : .client))
        // §9.1: one line per severed socket. Only the relay's own reasons are written — a
        // client's close reason is its text, and client text never reaches the log.
        let line: String
        if let sent = member.closedByRelay {
            line = "initiator=relay role=\(role) state=\(machine.stateName(of: id)) code=\(sent.code)\(sent.reason.isEmpty ? "" : " reason=\(sent.reason)")"
        } else if failedWithProtocolError {
            line = "initiator=error role=\(role) state=\(machine.stateName(of: id)) code=\(code)"
        } else {
            line = "initiator=remote role=\(role) state=\(machine.stateName(of: id)) code=\(code)"
        }
        server.write("relay \(tag) disconnect \(line) lived=\(lived.millisecondsClamped)ms")
        // Whoever waited for this socket to drain waits no more.
        releaseHolds(Hold.peer, except: id)
        perform(machine.disconnected(id))
        if members.isEmpty, machine.isEmpty {
            if let deadlineTimer { loop.cancel(deadlineTimer) }
            deadlineTimerStorage.value = nil
            table.remove(self)
        }
    }

    func closeAll(code: UInt16, reason: String) { perform(machine.closeAll(code: code, reason: reason)) }

    func perform(_ actions: [RoomAction]) {
        table.assertOnLoop()
        for action in actions { perform(action) }
    }

    /// Forwards are the splice's and carry a frame; `frame(from:…)` performs those itself.
    private func perform(_ action: RoomAction) {
        switch action {
        case let .send(id, text): members[id]?.connection?.send(text: Array(text.utf8))
        case let .close(id, code, reason):
            server.metrics.closed(code: code, reason: reason)
            guard let member = members[id] else { return }
            if member.closedByRelay == nil { members[id]?.closedByRelay = (code, reason) }
            member.connection?.close(code: code, reason: reason)
        case let .log(line): server.write(line)
        case .forward: break
        case let .deliver(source, target, isText, payload): forward(payload, isText: isText, from: source, to: target)
        case let .load(step): load(step)
        case let .persist(write):
            let key = machine.key, server = self.server
            table.store(key) { store in
                do throws(StoreError) { try store.apply(write, to: key) } catch { server.storageFailed(error) }
            }
        case let .holdReading(id): hold(id, Hold.storage)
        case let .resumeReading(id): release(id, Hold.storage)
        }
    }

    /// Runs the Proof's storage step on its store lane; the answer comes back on this loop.
    /// The host is kept alive by the closure until then, even if the room empties meanwhile (the
    /// machine then finds no socket to admit).
    private func load(_ step: AdmissionLoad) {
        let host = UncheckedTransfer(self)
        let loop = self.loop, key = machine.key
        let server = self.server
        table.store(key) { store in
            let answer: AdmissionAnswer?
            do throws(StoreError) {
                answer = try step.run(on: store, room: key)
            } catch {
                server.storageFailed(error)
                answer = nil
            }
            loop.execute {
                let room = host.value
                let now = room.table.clock.roomTime()
                room.perform(answer.map { room.machine.admissionLoaded($0, now: now) } ?? room.machine.admissionFailed(now: now))
                room.armDeadline()
            }
        }
    }

    // MARK: Holds and stalls

    private func hold(_ id: SocketID, _ reason: UInt8) {
        guard let member = members[id] else { return }
        if member.holds == 0 { member.connection?.pauseReading() }
        members[id]?.holds = member.holds | reason
    }

    private func release(_ id: SocketID, _ reason: UInt8) {
        guard let member = members[id], member.holds & reason != 0 else { return }
        members[id]?.holds = member.holds & ~reason
        if member.holds & ~reason == 0 { member.connection?.resumeReading() }
    }

    private func releaseHolds(_ reason: UInt8, except id: SocketID) {
        for (other, member) in members where other != id && member.holds & reason != 0 { release(other, reason) }
    }

    private func armDeadline() {
        let deadline = machine.nextDeadline
        // Most events leave the earliest deadline where it was (a hello, a second pending
        // socket): the armed timer stands.
        if deadline == deadlineTimerStorage.value?.at { return }
        if let deadlineTimer { loop.cancel(deadlineTimer) }
        deadlineTimerStorage.value = nil
        guard let deadline else { return }
        let now = table.clock.monotonic()
        // A strong capture (no weak side table per room): the timer is cancelled when the room
        // empties, which releases it.
        let timer = loop.schedule(after: deadline.elapsed(since: now)) { [self] in
            self.deadlineTimerStorage.value = nil
            self.perform(self.machine.tick(now: self.table.clock.monotonic()))
            self.armDeadline()
        }
        deadlineTimerStorage.value = (timer, deadline)
    }
}
