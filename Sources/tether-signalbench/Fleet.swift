import Foundation
import Glibc
import TetherCall
import TetherNet

/// A scenario's clients: fresh identities (made before anything is timed), all on one event
/// loop, since the load generator has one core to itself.
struct Fleet {
    let url: String
    let group: EventLoopGroup
    let clients: [BenchClient]

    init(url: String, count: Int, options: Options) {
        signal(SIGPIPE, SIG_IGN)
        let descriptors = Measure.raiseDescriptorLimit()
        if descriptors < count + 64 { options.fail("RLIMIT_NOFILE allows \(descriptors) descriptors, \(count + 64) are needed") }
        do { group = try EventLoopGroup(count: 1) } catch { options.fail("cannot start an event loop: \(error)") }
        self.url = url
        let loop = group.loops[0]
        clients = (0..<count).map { _ in BenchClient(identity: CallIdentity(), loop: loop) }
    }

    var loop: EventLoop { group.loops[0] }

    /// Registers `clients[range]` with `concurrency` registrations in flight.
    func register(_ range: Range<Int>? = nil, concurrency: Int) -> (registrar: Registrar, start: UInt64, end: UInt64) {
        let registrar = Registrar(url: url, concurrency: concurrency)
        let (start, end) = registrar.run(clients, range ?? clients.indices)
        return (registrar, start, end)
    }

    /// The value of `body` run on the loop.
    func onLoop<R: Sendable>(_ body: @escaping @Sendable () -> R) -> R {
        // submitAndWait only rethrows what `body` throws, and it throws nothing.
        try! loop.submitAndWait(body)
    }

    /// Closes every socket (1000) and gives the close handshakes a moment before the process exits.
    func closeAll() {
        let clients = UncheckedTransfer(clients)
        onLoop { for client in clients.value { client.close() } }
        usleep(300_000)
    }

    static func sleep(_ seconds: Double) {
        guard seconds > 0 else { return }
        usleep(UInt32(min(seconds, 4_000) * 1e6))
    }

    /// Sleeps until the monotonic time `deadline` (at once if it has passed).
    static func sleep(until deadline: UInt64) {
        let now = Measure.now()
        if deadline > now { sleep(Measure.seconds(deadline - now)) }
    }
}

/// CPU use over a window, of this process and (when its pid is known) the server's: 100 means
/// one core busy throughout.
struct CPUWindow {
    let wall: UInt64
    let own: UInt64
    let server: UInt64?
    let pid: Int32?

    init(server pid: Int32?) {
        self.pid = pid
        wall = Measure.now()
        own = Measure.ownCPU()
        server = pid.flatMap(Measure.cpu(of:))
    }

    /// (load %, server %, server CPU seconds) since the window began.
    func since() -> (load: Double, server: Double?, serverSeconds: Double?) {
        let elapsed = Double(max(1, Measure.now() - wall))
        let load = Double(Measure.ownCPU() - own) / elapsed * 100
        guard let server, let pid, let now = Measure.cpu(of: pid) else { return (load, nil, nil) }
        return (load, Double(now &- server) / elapsed * 100, Double(now &- server) / 1e9)
    }
}
