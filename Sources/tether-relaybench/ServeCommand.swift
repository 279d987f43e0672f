import Foundation
import Glibc
import TetherNet
import TetherRelay
import TetherStore
import TetherWire
import TetherEncoding

/// `serve`: the relay under test, in a process of its own so its CPU is its own. Open mode, every
/// abuse limit raised so none binds (all the load comes from 127.0.0.1), SQLite behind a
/// `DelayedRoomStore`, and N established rooms stored before it listens.
enum ServeCommand {
    static let usage = """
    usage: tether-relaybench serve --port P [--store-delay-ms D] [--db PATH] [--rooms N] [--loops L] [--lanes K]
      --store-delay-ms  wait before every store call (default 0)
      --db              SQLite file or postgres:// URL; rooms already established in it are kept
                        (default relaybench.db)
      --rooms           established rooms to store before listening (default 5000)
      --loops           relay event loops (default: one per usable CPU, as `tether relay`)
      --lanes           store lanes (default \(RoomStoreExecutor.defaultLanes), as `tether relay`)

    """

    static func run(_ arguments: [String]) -> Never {
        let flags = Flags(arguments, usage: usage)
        flags.only(["port", "store-delay-ms", "db", "rooms", "loops", "lanes"])
        guard let port = flags.string("port").flatMap(UInt16.init) else { Flags.fail("--port is required", usage) }
        let delayMs = flags.double("store-delay-ms", default: 0)
        let path = flags.string("db", default: "relaybench.db")
        let rooms = flags.int("rooms", default: 5000)
        let lanes = flags.int("lanes", default: RoomStoreExecutor.defaultLanes)
        ProcessStats.raiseDescriptorLimit()

        let base: any RoomStore
        do { base = try StoreLocation(path).openRoomStore(lanes: lanes) } catch { Flags.fail("--db: \(error)", usage) }
        let stored: Int
        do { stored = try establish(rooms, in: base) } catch { Flags.fail("--db: \(error)", usage) }

        var configuration = RelayConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = port
        configuration.databasePath = path
        configuration.attestationRequired = false
        configuration.origin = "http://127.0.0.1:\(port)"
        configuration.wsRateLimit = 0
        configuration.maxSocketsPerIP = 1_000_000
        configuration.maxTotalSockets = 1_000_000
        configuration.maxFramesPerSecond = 0
        configuration.dailyByteQuota = 1_000_000_000_000_000

        signal(SIGPIPE, SIG_IGN)
        // Blocked before any loop or lane thread exists, so only the sigwait below takes them.
        var stop = sigset_t()
        sigemptyset(&stop)
        sigaddset(&stop, SIGINT)
        sigaddset(&stop, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &stop, nil)

        let group: EventLoopGroup
        let relay: RelayServer
        do {
            group = try EventLoopGroup(count: flags.string("loops").flatMap(Int.init))
            relay = RelayServer(configuration: configuration, group: group, store: delayMs > 0 ? DelayedRoomStore(base, delayMilliseconds: delayMs) : base,
                                storeLanes: lanes)
            try relay.start()
        } catch {
            Flags.fail("cannot start the relay: \(error)", usage)
        }
        let backlog = BacklogWatch(relay.storage)
        // The line `run` (or a person) waits for; straight to the descriptor, unbuffered.
        FileHandle.standardOutput.write(Data("relaybench: serving on 127.0.0.1:\(port) store-delay-ms=\(delayMs) rooms=\(rooms) loops=\(group.loops.count) lanes=\(lanes) pid=\(getpid())\n".utf8))

        var received: Int32 = 0
        sigwait(&stop, &received)
        let peak = backlog.stop()
        relay.shutdown()
        group.shutdown()
        FileHandle.standardOutput.write(Data(#"{"serve":true,"store_delay_ms":\#(delayMs),"rooms_established":\#(rooms),"rooms_stored_at_start":\#(stored),"loops":\#(group.loops.count),"lanes":\#(lanes),"store_backlog_peak":\#(peak),"relay_cpu_s":\#(String(format: "%.2f", Double(ProcessStats.ownCPU()) / 1e9))}"#.utf8 + [0x0A]))
        exit(0)
    }

    /// Stores the verifier of every bench room not yet established, straight into the store (no
    /// delay: this is set-up, not the measurement). A verifier commits with a full fsync, so a
    /// database kept from an earlier run (`--db`) spares thousands of them. Returns the rooms
    /// stored now.
    static func establish(_ count: Int, in store: any RoomStore) throws(StoreError) -> Int {
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        var stored = 0
        for index in 0..<count {
            let key = RoomKey(BenchRooms.name(index))
            guard try store.verifier(of: key) == nil else { continue }
            if try store.setVerifier(Base64.encode(BenchRooms.secret(index).verifier), of: key, now: now) { stored += 1 }
        }
        return stored
    }
}
