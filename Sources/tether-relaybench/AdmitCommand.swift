import Foundation
import Glibc
import TetherClient
import TetherNet
import TetherWire
import TetherSync

/// `admit`: admissions per second and their latency, closed loop. `--concurrency` workers each
/// sign a join for an established room (a different room each time, round robin over `--rooms`),
/// wait for the relay's answer, close, and go again, for `--seconds`. What it measures is the
/// relay's whole admission path — the Proof's storage read on a lane, the signature check — so
/// run it once against a SQLite `serve` and once against a PostgreSQL one to compare the stores.
/// Prints one JSON line: admissions/s, latency percentiles (µs), and refusals by reason.
enum AdmitCommand {
    static let usage = """
    usage: tether-relaybench admit --port P [--rooms N] [--concurrency C] [--seconds S] [--loops L] [--label TEXT]
      --rooms        established rooms to join, the serve side's --rooms (default 5000)
      --concurrency  joins in flight at once (default 64)
      --seconds      measured time, after a 1 s warm-up (default 10)
      --loops        client event loops (default 2)

    """

    static func run(_ arguments: [String]) async -> Never {
        let flags = Flags(arguments, usage: usage)
        flags.only(["port", "rooms", "concurrency", "seconds", "loops", "label"])
        guard let port = flags.string("port").flatMap(UInt16.init) else { Flags.fail("--port is required", usage) }
        let roomCount = max(1, flags.int("rooms", default: 5000))
        let concurrency = max(1, flags.int("concurrency", default: 64))
        let seconds = flags.double("seconds", default: 10)
        let label = flags.string("label", default: "")
        ProcessStats.raiseDescriptorLimit()
        signal(SIGPIPE, SIG_IGN)
        let group: EventLoopGroup
        do { group = try EventLoopGroup(count: max(1, flags.int("loops", default: 2))) } catch { Flags.fail("event loops: \(error)", usage) }
        let origin = "http://127.0.0.1:\(port)"
        let rooms = (0..<roomCount).map { (RelayRoom(origin: origin, name: BenchRooms.name($0)), BenchRooms.secret($0)) }
        let tally = Tally()
        let warmupEnds = ProcessStats.now() + 1_000_000_000
        let ends = warmupEnds + UInt64(seconds * 1e9)

        await withTaskGroup(of: Void.self) { workers in
            for worker in 0..<concurrency {
                let loop = group.loops[worker % group.loops.count]
                workers.addTask {
                    var next = worker
                    while ProcessStats.now() < ends {
                        let (room, secret) = rooms[next % rooms.count]
                        next += concurrency
                        let started = ProcessStats.now()
                        do throws(AdmissionError) {
                            let socket = try await RelayAdmission.join(room, role: .mac, proof: .signed(secret), on: loop)
                            let finished = ProcessStats.now()
                            socket.close()
                            if started >= warmupEnds, finished <= ends { tally.admitted(finished - started) }
                        } catch {
                            if started >= warmupEnds { tally.refused(Storm.kind(of: error)) }
                        }
                    }
                }
            }
        }
        let (latencies, refusals) = tally.results
        let rate = Double(latencies.count) / seconds
        let refused = refusals.map { "\"\(LoadCommand.escape($0.key))\":\($0.value)" }.sorted().joined(separator: ",")
        FileHandle.standardOutput.write(Data((#"{"admit":true,"label":"\#(LoadCommand.escape(label))","rooms":\#(roomCount),"concurrency":\#(concurrency),"seconds":\#(seconds),"#
            + #""admissions":\#(latencies.count),"admissions_per_s":\#(String(format: "%.0f", rate)),"latency_us":\#(Percentiles(latencies).json(divisor: 1_000)),"refused":{\#(refused)}}"#
            + "\n").utf8))
        group.shutdown()
        exit(refusals.isEmpty ? 0 : 1)
    }

    private final class Tally: Sendable {
        private let counts = Locked<(latencies: [UInt64], refusals: [String: Int])>(([], [:]))

        func admitted(_ nanoseconds: UInt64) { counts.withLock { $0.latencies.append(nanoseconds) } }
        func refused(_ kind: String) { counts.withLock { $0.refusals[kind, default: 0] += 1 } }
        var results: ([UInt64], [String: Int]) { counts.withLock { ($0.latencies, $0.refusals) } }
    }
}
