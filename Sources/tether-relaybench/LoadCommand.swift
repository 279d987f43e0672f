import Foundation
import Glibc
import TetherClient
import TetherNet
import TetherWire

/// `load`: the clients. Opens the ping pairs and starts their round trips, lets them settle, then
/// sets off the storm (every established room's mac rejoining at once) and keeps the pairs
/// running until the end. Prints one JSON line.
///
/// Windows (by round-trip completion time): `warmup` before the storm; `storm` from its start until
/// the last room is back (the figure the target is about); `after_start` from its start to the end.
enum LoadCommand {
    static let usage = """
    usage: tether-relaybench load --port P [--rooms N] [--pairs M] [--seconds S] [--warmup W] [--loops L] [--relay-pid PID] [--label TEXT]
                                  [--tls-ca FILE]
      --rooms      established rooms whose macs rejoin at once (default 5000; the serve side's --rooms)
      --pairs      spliced ping pairs, 64 B frames, one in flight (default 100)
      --seconds    length of the run from the pairs' first round trip (default 20); it runs on
                   until every join has ended if the storm takes longer
      --warmup     seconds of round trips before the storm (default 1)
      --loops      event loops: the pairs on the first, the storm's joins on the others (default 2)
      --relay-pid  the relay's process, to report its CPU use during the storm
      --label      copied into the JSON line
      --tls-ca     the pairs connect with wss://, trusting this CA (a relay with --tls-cert); with
                   --rooms 0 the pairs are spread over every loop, for a frame-rate measurement

    """

    static func run(_ arguments: [String]) async -> Never {
        let flags = Flags(arguments, usage: usage)
        flags.only(["port", "rooms", "pairs", "seconds", "warmup", "loops", "relay-pid", "label", "tls-ca"])
        guard let port = flags.string("port").flatMap(UInt16.init) else { Flags.fail("--port is required", usage) }
        let roomCount = flags.int("rooms", default: 5000)
        let pairCount = flags.int("pairs", default: 100)
        let seconds = flags.double("seconds", default: 20)
        let warmup = flags.double("warmup", default: 1)
        let relayPID = flags.string("relay-pid").flatMap(Int32.init)
        let descriptors = ProcessStats.raiseDescriptorLimit()
        signal(SIGPIPE, SIG_IGN)
        if descriptors < roomCount + 2 * pairCount + 64 {
            Flags.fail("RLIMIT_NOFILE allows \(descriptors) descriptors, fewer than \(roomCount + 2 * pairCount + 64) needed", usage)
        }

        let group: EventLoopGroup
        do { group = try EventLoopGroup(count: max(1, flags.int("loops", default: 2))) } catch { Flags.fail("\(error)", usage) }
        let pairLoop = group.loops[0]
        let stormLoops = group.loops.count > 1 ? Array(group.loops.dropFirst()) : group.loops
        let origin = "http://127.0.0.1:\(port)"
        var tls: TLSClientContext?
        if let ca = flags.string("tls-ca") {
            guard roomCount == 0 else { Flags.fail("--tls-ca measures the pairs alone: use --rooms 0", usage) }
            do { tls = try TLSClientContext(caFile: ca) } catch { Flags.fail("--tls-ca: \(error)", usage) }
        }

        // 1. The pairs, all on one loop so each round trip is timed where its frames are handled
        // (a pure frame-rate run spreads them over every loop instead; each is still timed on its own).
        let pairLoops = roomCount == 0 ? group.loops : [pairLoop]
        let pairs = (0..<pairCount).map { PingPair(loop: pairLoops[$0 % pairLoops.count], tls: tls) }
        let openFailures = await open(pairs, url: "\(tls == nil ? "ws" : "wss")://127.0.0.1:\(port)/")
        guard openFailures.isEmpty else { Flags.fail("pairs failed to open: \(openFailures.prefix(5))", usage) }

        let storm = Storm(origin: origin, count: roomCount, loops: stormLoops)
        let begin = ProcessStats.now()
        for loop in pairLoops { loop.execute { for pair in pairs where pair.loop === loop { pair.start() } } }

        // 2. Warm-up, then the storm.
        try? await Task.sleep(nanoseconds: UInt64(warmup * 1e9))
        let loadCPU = CPUWindow { ProcessStats.ownCPU() }
        let relayCPU = relayPID.map { pid in CPUWindow { ProcessStats.cpu(of: pid) } }
        await storm.run()
        let stormEnded = ProcessStats.now()
        let stormLoadCPU = loadCPU.percent()
        let stormRelayCPU = relayCPU?.percent()

        // 3. The pairs run on to the end of the window.
        let end = begin + UInt64(seconds * 1e9)
        if end > ProcessStats.now() { try? await Task.sleep(nanoseconds: end - ProcessStats.now()) }
        let windowLoadCPU = loadCPU.percent()
        let windowRelayCPU = relayCPU?.percent()
        var stopped: [PingPair] = []
        for loop in pairLoops {
            let mine = pairs.filter { $0.loop === loop }
            _ = try? loop.submitAndWait { for pair in mine { pair.stop() } }
            stopped += mine
        }
        let results = PairResults(stopped)
        let finished = ProcessStats.now()

        let latencies = storm.admissionLatencies
        let admitted = latencies.count
        let stormStart = storm.startedAt
        let lastBack = storm.lastAdmittedAt
        let backBy = admitted == roomCount ? lastBack ?? stormEnded : stormEnded
        let errors = storm.errorKinds
        var json = "{"
        json += "\"label\":\"\(flags.string("label", default: ""))\",\"rooms\":\(roomCount),\"pairs\":\(pairCount)"
        json += ",\"rtt_storm_us\":\(results.rtt(from: stormStart, to: backBy).json(divisor: 1000))"
        json += ",\"rtt_warmup_us\":\(results.rtt(from: begin, to: stormStart).json(divisor: 1000))"
        json += ",\"rtt_after_start_us\":\(results.rtt(from: stormStart, to: finished).json(divisor: 1000))"
        json += ",\"rooms_admitted\":\(admitted),\"errors\":\(errors.values.reduce(0, +) + results.frameErrors + results.lost.count)"
        json += ",\"join_errors\":{\(errors.sorted { $0.key < $1.key }.map { "\"\(escape($0.key))\":\($0.value)" }.joined(separator: ","))}"
        json += ",\"pair_frame_errors\":\(results.frameErrors),\"pair_sockets_lost\":\(results.lost.count)"
        json += ",\"rooms_closed_after_admission\":\(storm.closedSince)"
        json += ",\"storm_seconds\":\(admitted == roomCount ? secondsText(lastBack.map { $0 - stormStart } ?? 0) : "null")"
        json += ",\"admit_ms\":\(Percentiles(latencies).json(divisor: 1_000_000))"
        json += ",\"load_cpu_pct_storm\":\(percent(stormLoadCPU)),\"load_cpu_pct_after_start\":\(percent(windowLoadCPU))"
        json += ",\"relay_cpu_pct_storm\":\(percent(stormRelayCPU)),\"relay_cpu_pct_after_start\":\(percent(windowRelayCPU))"
        json += ",\"load_cpu_s\":\(secondsText(ProcessStats.ownCPU())),\"loops\":\(group.loops.count),\"seconds\":\(secondsText(finished - begin))}"
        FileHandle.standardOutput.write(Data((json + "\n").utf8))
        // The pairs' legs and the storm's sockets stay open (and their callbacks reach their
        // owners) until the process ends: the optimiser must not end these objects' lives early.
        withExtendedLifetime((pairs, storm, group)) { exit(0) }
    }

    /// Opens every pair, 32 at a time (a pair is two sockets and two admissions: opened all at
    /// once they would be a storm of their own). Returns why any failed.
    static func open(_ pairs: [PingPair], url: String) async -> [String] {
        var failures: [String] = []
        for batch in stride(from: 0, to: pairs.count, by: 32) {
            failures += await withTaskGroup(of: String?.self) { group in
                for pair in pairs[batch..<min(batch + 32, pairs.count)] {
                    group.addTask {
                        await withCheckedContinuation { continuation in
                            pair.loop.execute { pair.open(url: url) { continuation.resume(returning: $0) } }
                        }
                    }
                }
                var failed: [String] = []
                for await failure in group { if let failure { failed.append(failure) } }
                return failed
            }
        }
        return failures
    }

    static func secondsText(_ ns: UInt64) -> String { String(format: "%.3f", Double(ns) / 1e9) }
    static func percent(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "null" }
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}

/// Every pair's round trips, copied off the pairs' loop at the end.
struct PairResults: Sendable {
    let completedAt: [UInt64]
    let roundTrips: [UInt64]
    let frameErrors: Int
    let lost: [String]

    init(_ pairs: [PingPair]) {
        completedAt = pairs.flatMap(\.completedAt)
        roundTrips = pairs.flatMap(\.roundTrips)
        frameErrors = pairs.reduce(0) { $0 + $1.frameErrors }
        lost = pairs.flatMap(\.lost)
    }

    /// Round trips that completed in `[from, to)` (monotonic ns).
    func rtt(from: UInt64, to: UInt64) -> Percentiles {
        Percentiles(zip(completedAt, roundTrips).filter { $0.0 >= from && $0.0 < to }.map(\.1))
    }
}
