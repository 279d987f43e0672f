import TetherNet
import TetherWire

/// One resident room: its machine, its sockets, and the actions performed on them. The host is
/// the delegate of each of its WebSockets; a socket's entry is a value in the host's map rather
/// than an object of its own, since every parked connection pays for whatever lives here.
final class RoomHost: WebSocketDelegate {
    /// One WebSocket of the room.
    struct Member {
        var connection: WebSocketConnection?
        let ip: String
        let openedAt: UInt64
        /// The close the relay started, if it did (for the disconnect line); out of line, as
        /// only a socket being closed has one.
        var closedByRelayStorage = OutOfLine<(code: UInt16, reason: String)>()
        var closedByRelay: (code: UInt16, reason: String)? {
            get { closedByRelayStorage.value }
            set { closedByRelayStorage.value = newValue }
        }
    }

    /// Inline, not an object of its own: one allocation less per resident room.
    var machine: RoomMachine
    unowned let table: RoomTable
    private var members = SmallMap<SocketID, Member>()
    /// The admission deadline's timer: out of line, since only a room with a pending socket has one.
    private var deadlineTimerStorage = OutOfLine<EventLoop.TimerID>()
    private var deadlineTimer: EventLoop.TimerID? {
        get { deadlineTimerStorage.value }
        set { deadlineTimerStorage.value = newValue }
    }

    var loop: EventLoop { table.loop }

    /// The relay outlives every room it hosts.
    private var server: RelayServer { table.server! }

    init(machine: RoomMachine, table: RoomTable) {
        self.machine = machine
        self.table = table
    }

    func adopt(_ transport: any Transport, id: SocketID, leftover: [UInt8], ip: String, connectedAt: UInt64) {
        members[id] = Member(connection: nil, ip: ip, openedAt: connectedAt)
        perform(machine.connected(id, now: connectedAt))
        table.adopting = id
        let connection = WebSocketConnection(connection: transport, role: .server, options: server.webSocketOptions,
                                             delegate: self, leftover: leftover)
        table.adopting = nil
        // Gone already if its leftovers closed it.
        if members[id] != nil { members[id]?.connection = connection }
        armDeadline()
    }

    private func id(of socket: WebSocketConnection) -> SocketID? {
        members.first { $0.value.connection === socket }?.key ?? table.adopting
    }

    // MARK: WebSocketDelegate

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        if let id = id(of: socket) { frame(from: id, isText: true, payload: text) }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        if let id = id(of: socket) { frame(from: id, isText: false, payload: data) }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        guard let id = id(of: socket) else { return }
        members[id]?.connection = nil
        gone(id, code: code, reason: reason, failedWithProtocolError: socket.failedWithProtocolError)
    }

    // MARK: Events

    private func frame(from id: SocketID, isText: Bool, payload: [UInt8]) {
        // One pass in the machine's order; the splice's common case is a single forward.
        for action in machine.frame(from: id, isText: isText, payload: payload, now: RelayServer.milliseconds()) {
            guard case let .forward(target) = action else {
                perform(action)
                continue
            }
            if let out = members[target]?.connection {
                if isText { out.send(text: payload) } else { out.send(binary: payload) }
            }
        }
        armDeadline()
    }

    private func gone(_ id: SocketID, code: UInt16, reason: String, failedWithProtocolError: Bool) {
        guard let member = members.removeValue(forKey: id) else { return }
        server.release(member.ip)
        let lived = RelayServer.milliseconds() &- member.openedAt
        server.metrics.socketLifetime(milliseconds: lived)
        let tag = machine.key.logTag, role = machine.role(of: id)?.rawValue ?? "?"
        if code == WebSocketCloseCode.abnormal, reason == WebSocketConnection.keepaliveTimeoutReason {
            server.metrics.keepaliveTermination()
            server.write("relay \(tag) keepalive no-pong; terminating role=\(role) lived=\(lived)ms")
        }
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
        server.write("relay \(tag) disconnect \(line) lived=\(lived)ms")
        perform(machine.disconnected(id))
        if members.isEmpty, machine.isEmpty {
            if let deadlineTimer { loop.cancel(deadlineTimer) }
            deadlineTimer = nil
            table.remove(self)
        }
    }

    func closeAll(code: UInt16, reason: String) { perform(machine.closeAll(code: code, reason: reason)) }

    private func perform(_ actions: [RoomAction]) {
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
        }
    }

    private func armDeadline() {
        if let deadlineTimer { loop.cancel(deadlineTimer) }
        deadlineTimer = nil
        guard let deadline = machine.nextDeadline else { return }
        let now = RelayServer.milliseconds()
        // A strong capture (no weak side table per room): the timer is cancelled when the room
        // empties, which releases it.
        deadlineTimer = loop.schedule(after: .milliseconds(deadline > now ? deadline - now : 0)) { [self] in
            self.deadlineTimer = nil
            self.perform(self.machine.tick(now: RelayServer.milliseconds()))
            self.armDeadline()
        }
    }
}
