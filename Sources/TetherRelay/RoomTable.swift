import TetherSync
import TetherNet
import TetherService
import TetherStore
import TetherWire

/// The rooms living on one loop.
final class RoomTable: @unchecked Sendable {   // confined to `loop` (asserted); shared only to be reached from it
    let loop: EventLoop
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    /// Set once the server is made (rooms reach it through their table, not a reference each).
    @exclusivity(unchecked) weak var server: RelayServer?
    @exclusivity(unchecked) private var rooms = RoomIndex<RoomHost> { $0.machine.room }
    /// Admission windows (§3.4 step 1) of rooms evicted while their window still ran, by the
    /// room's per-process seeded hash. A room empties whenever its last socket goes, and every
    /// admission attempt comes on a fresh socket, so without this an attacker retrying on new
    /// sockets would never meet the 40-per-10 s limit. A collision only makes two rooms share a
    /// window (stricter, never looser); a client cannot aim at one (the seed is random).
    @exclusivity(unchecked) private var evictedWindows = EvictedWindows(capacity: RoomTable.maxEvictedWindows)
    /// At most this many windows per loop (at the cap about 5 MiB of table and up to 4 MiB of
    /// eviction order). Reaching it takes tens of thousands of rooms each sent a Proof within
    /// 10 s on one loop; past it expired windows at the front go first, then the oldest kept.
    static let maxEvictedWindows = 65_536

    /// The relay's clock, held here so the splice reads it without going through the relay.
    let clock: RelayClock

    init(loop: EventLoop, clock: RelayClock) {
        self.loop = loop
        self.clock = clock
    }

    func attach(_ transport: any Transport, leftover: [UInt8], room: RoomName, server: RelayServer, ip: String,
                id: SocketID, connectedAt: MonotonicInstant) {
        assertOnLoop()
        let host = rooms[room] ?? {
            let window = evictedWindows.isEmpty ? nil : evictedWindows.take(room.hashValue)
            let host = RoomHost(machine: server.makeMachine(for: room, admissionWindow: window), table: self)
            rooms.insert(host)
            server.roomBecameResident(room)
            return host
        }()
        host.adopt(transport, id: id, leftover: leftover, ip: ip, connectedAt: connectedAt)
    }

    /// The room's last socket is gone: it stops being resident, keeping its admission window if
    /// that still runs.
    func remove(_ host: RoomHost) {
        assertOnLoop()
        let room = host.machine.room
        rooms.remove(room)
        server?.roomLeft(room)
        evictedWindows.keep(host.machine.admissionWindow, for: room.hashValue, now: clock.monotonic())
    }

    /// Store lanes this iteration queued work for and has not woken yet (bit per lane).
    @exclusivity(unchecked) private var lanesToWake: UInt64 = 0

    /// Queues a room's storage work on its lane; the lane is woken once, at the loop's next flush
    /// point, for everything queued since the last one (a reconnect storm's admissions arrive
    /// many to an iteration).
    func store(_ key: RoomKey, _ work: @escaping @Sendable (any RoomStore) -> Void) {
        guard let storage = server?.storage, let lane = storage.enqueue(key, work) else { return }
        // A lane beyond the mask's 64 bits is woken at once.
        guard lane < 64 else { return storage.wake(lane: lane) }
        if lanesToWake == 0 {
            loop.atFlushPoint { [self] in
                let lanes = lanesToWake
                lanesToWake = 0
                for index in 0..<64 where lanes & (1 << index) != 0 { storage.wake(lane: index) }
            }
        }
        lanesToWake |= 1 << UInt64(lane)
    }


    func closeAll(code: UInt16, reason: String) {
        assertOnLoop()
        for host in rooms.values { host.closeAll(code: code, reason: reason) }
    }

    func closeRoom(_ room: RoomName, code: UInt16, reason: String) {
        assertOnLoop()
        rooms[room]?.closeAll(code: code, reason: reason)
    }

    /// Loop confinement, checked in debug builds: a table (and every room in it) is touched only
    /// on its own loop's thread, which is what makes it safe without locks.
    @inline(__always)
    func assertOnLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(loop.inEventLoop, "room table touched off its loop", file: file, line: line)
    }

    /// Closes every room for which `close` gives a code and reason.
    func closeRooms(_ close: (RoomName) -> (code: UInt16, reason: String)?) {
        assertOnLoop()
        for host in rooms.values {
            if let (code, reason) = close(host.machine.room) { host.closeAll(code: code, reason: reason) }
        }
    }

    func occupancy(adding sum: RelayMetrics.Occupancy) -> RelayMetrics.Occupancy {
        assertOnLoop()
        var sum = sum
        for host in rooms.values {
            sum.rooms += 1
            let (mac, phone) = (host.machine.admitted(.mac) != nil, host.machine.admitted(.phone) != nil)
            switch (mac, phone) {
            case (true, true): sum.both += 1
            case (true, false): sum.macOnly += 1
            case (false, true): sum.phoneOnly += 1
            case (false, false): sum.neither += 1
            }
            let admitted = (mac ? 1 : 0) + (phone ? 1 : 0)
            sum.pendingSockets += host.machine.socketCount - admitted
            if admitted == 2 { sum.splicedSockets += 2 } else { sum.parkedSockets += admitted }
        }
        return sum
    }
}
