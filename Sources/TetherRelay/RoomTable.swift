import TetherNet
import TetherWire

/// The rooms living on one loop.
final class RoomTable: @unchecked Sendable {
    let loop: EventLoop
    /// Set once the server is made (rooms reach it through their table, not a reference each).
    weak var server: RelayServer?
    private var rooms = RoomIndex<RoomHost> { $0.machine.room }
    /// The socket whose WebSocket is being set up on this loop: frames in its handshake
    /// leftovers arrive before its host can find the connection among its members.
    var adopting: SocketID?

    init(loop: EventLoop) { self.loop = loop }

    func attach(_ transport: any Transport, leftover: [UInt8], room: RoomName, server: RelayServer, ip: String,
                id: SocketID, connectedAt: UInt64) {
        let host = rooms[room] ?? {
            let host = RoomHost(machine: server.makeMachine(for: room), table: self)
            rooms.insert(host)
            server.roomBecameResident(room)
            return host
        }()
        host.adopt(transport, id: id, leftover: leftover, ip: ip, connectedAt: connectedAt)
    }

    /// The room's last socket is gone: it stops being resident.
    func remove(_ host: RoomHost) {
        let room = host.machine.room
        rooms.remove(room)
        server?.roomLeft(room)
    }

    func closeAll(code: UInt16, reason: String) {
        for host in rooms.values { host.closeAll(code: code, reason: reason) }
    }

    func closeRoom(_ room: RoomName, code: UInt16, reason: String) { rooms[room]?.closeAll(code: code, reason: reason) }

    /// Closes every room for which `close` gives a code and reason.
    func closeRooms(_ close: (RoomName) -> (code: UInt16, reason: String)?) {
        for host in rooms.values {
            if let (code, reason) = close(host.machine.room) { host.closeAll(code: code, reason: reason) }
        }
    }

    func occupancy(adding sum: RelayMetrics.Occupancy) -> RelayMetrics.Occupancy {
        var sum = sum
        for host in rooms.values {
            sum.rooms += 1
            switch (host.machine.admitted(.mac) != nil, host.machine.admitted(.phone) != nil) {
            case (true, true): sum.both += 1
            case (true, false): sum.macOnly += 1
            case (false, true): sum.phoneOnly += 1
            case (false, false): sum.neither += 1
            }
        }
        return sum
    }
}
