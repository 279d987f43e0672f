import Foundation
import Glibc

/// `run`: the whole scenario, both configurations. For each store delay (0 and 2 ms by default)
/// it starts `serve` and `load` as two processes — pinned to separate CPUs when there are two, as
/// ../shared/bench/compare-floor.sh pins relay and load — collects their JSON lines and prints a
/// summary: the pairs' RTT p99 during the storm with and without the delay, their ratio against
/// the 1.5× target, and how long every room took to come back.
enum RunCommand {
    static let usage = """
    usage: tether-relaybench run [--rooms N] [--pairs M] [--seconds S] [--delays 0,2] [--reps R] [--port P]
                                 [--db PATH] [--out DIR] [--relay-cpus 0] [--load-cpus 1] [--no-pin] [--quiet-wait S]
      --delays      store delays in ms to compare; the first is the baseline (default 0,2)
      --reps        runs of each delay, alternating their order; medians are reported (default 1)
      --port        first port; each run uses the next one (default 9400)
      --db          the rooms' SQLite file, shared by every run (default DIR/relay.db)
      --out         where logs and JSON lines go (default a new /tmp/relaybench-* directory)
      --quiet-wait  wait up to S seconds for other processes to use under 20% of one CPU (default 60)

    """

    static let target = 1.5

    static func run(_ arguments: [String]) -> Never {
        let flags = Flags(arguments, switches: ["no-pin"], usage: usage)
        flags.only(["rooms", "pairs", "seconds", "delays", "reps", "port", "db", "out", "relay-cpus", "load-cpus", "quiet-wait"])
        let rooms = flags.int("rooms", default: 5000), pairs = flags.int("pairs", default: 100)
        let seconds = flags.double("seconds", default: 20)
        let delays = flags.string("delays", default: "0,2").split(separator: ",").compactMap { Double($0) }
        guard delays.count >= 2 else { Flags.fail("--delays needs two or more values", usage) }
        let reps = max(1, flags.int("reps", default: 1))
        var port = flags.int("port", default: 9400)
        let directory = flags.string("out") ?? makeTemporaryDirectory()
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let db = flags.string("db", default: directory + "/relay.db")
        let pin = !flags.has("no-pin") && sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2
        let relayCPUs = flags.string("relay-cpus", default: "0"), loadCPUs = flags.string("load-cpus", default: "1")
        let quietWait = flags.double("quiet-wait", default: 60)
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        note("relaybench: \(rooms) rooms, \(pairs) pairs, \(seconds) s, delays \(delays) ms, \(reps) rep(s), \(pin ? "relay on CPU \(relayCPUs), load on CPU \(loadCPUs)" : "unpinned"); output in \(directory)")

        var results: [Double: [Run]] = [:]
        for rep in 0..<reps {
            // Alternate the order so a machine that drifts slowly hurts neither side.
            for delay in rep % 2 == 0 ? delays : delays.reversed() {
                let foreign = waitForQuiet(upTo: quietWait)
                let launcher = Launcher(executable: executable, directory: directory, pin: pin)
                let run = Run.measure(delay: delay, port: port, rooms: rooms, pairs: pairs, seconds: seconds, db: db,
                                      relayCPUs: relayCPUs, loadCPUs: loadCPUs, launcher: launcher, foreignBefore: foreign)
                port += 1
                FileHandle.standardOutput.write(Data((run.line + "\n").utf8))
                note("relaybench: delay \(delay) ms: storm p99 \(run.p99["storm"].map { "\(Int($0)) µs" } ?? "?"), every room back in \(run.stormSeconds.map { String(format: "%.2f s", $0) } ?? "never"), errors \(run.errors)")
                results[delay, default: []].append(run)
            }
        }
        FileHandle.standardOutput.write(Data((summary(results, delays: delays, rooms: rooms, pairs: pairs) + "\n").utf8))
        exit(0)
    }

    /// The summary line, with medians over the reps. The ratio the target is about is the storm
    /// window's; the window to the end of the run is given too, since an undelayed storm is short.
    static func summary(_ results: [Double: [Run]], delays: [Double], rooms: Int, pairs: Int) -> String {
        func median(_ values: [Double]) -> Double? {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return nil }
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        func text(_ value: Double?, _ format: String = "%.0f") -> String { value.map { String(format: format, $0) } ?? "null" }
        func p99(_ delay: Double, _ window: String) -> Double? { median(results[delay]?.compactMap { $0.p99[window] } ?? []) }
        func ratio(_ delay: Double, _ window: String) -> Double? {
            guard let base = p99(delays[0], window), base > 0, let value = p99(delay, window) else { return nil }
            return value / base
        }
        var fields: [String] = []
        var human: [String] = []
        for delay in delays {
            let runs = results[delay] ?? []
            let errors = runs.reduce(0) { $0 + $1.errors }
            let storm = median(runs.compactMap(\.stormSeconds))
            // The storm against the same run's calm: what the storm itself costs the pairs.
            let calm = median(runs.compactMap { run in run.p99["storm"].flatMap { storm in run.p99["warmup"].map { storm / $0 } } })
            let windows = Run.windows.map { "\"\($0)\":\(text(p99(delay, $0)))" }.joined(separator: ",")
            fields.append(#"{"store_delay_ms":\#(delay),"rtt_p99_us":{\#(windows)},"p99_ratio_storm":\#(text(ratio(delay, "storm"), "%.2f")),"p99_ratio_after_start":\#(text(ratio(delay, "after_start"), "%.2f")),"storm_p99_over_warmup_p99":\#(text(calm, "%.1f")),"storm_seconds":\#(text(storm, "%.2f")),"errors":\#(errors),"foreign_cpu_pct":\#(text(median(runs.compactMap(\.foreign)), "%.1f")),"runs":\#(runs.count)}"#)
            human.append("""
                  store delay \(delay) ms: pairs' RTT p99 \(text(p99(delay, "warmup"))) µs before the storm, \(text(p99(delay, "storm"))) µs during it \
                (\(text(ratio(delay, "storm"), "%.2f"))× the baseline; target ≤ \(target)×), \(text(p99(delay, "after_start"))) µs from its start to the end \
                (\(text(ratio(delay, "after_start"), "%.2f"))×); the storm raised the pairs' p99 \(text(calm, "%.1f"))× over the calm before it; every room back in \(text(storm, "%.2f")) s; errors \(errors)
                """)
        }
        note("relaybench summary (\(rooms) rooms, \(pairs) pairs; medians; baseline: store delay \(delays[0]) ms):\n" + human.joined(separator: "\n"))
        return #"{"summary":true,"rooms":\#(rooms),"pairs":\#(pairs),"target_ratio":\#(target),"configurations":[\#(fields.joined(separator: ","))]}"#
    }

    /// Waits until the rest of the machine is quiet (under 20% of one CPU over a second), or until
    /// `limit` seconds pass; returns the last figure, so a disturbed run can be told apart.
    static func waitForQuiet(upTo limit: Double) -> Double? {
        let deadline = ProcessStats.now() + UInt64(limit * 1e9)
        var busy: Double?
        repeat {
            guard let before = ProcessStats.machineBusy() else { return nil }
            sleep(1)
            guard let after = ProcessStats.machineBusy() else { return nil }
            busy = Double(after - before) / 1e7
            if busy! < 20 { break }
        } while ProcessStats.now() < deadline
        return busy
    }

    static func makeTemporaryDirectory() -> String {
        var template = Array("/tmp/relaybench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { return "/tmp" }
        return String(cString: made)
    }

    static func note(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
}
