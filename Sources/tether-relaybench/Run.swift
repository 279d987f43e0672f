import Foundation
import Glibc

/// One measurement: a fresh relay with the given store delay, one load run against it, and what
/// both reported, plus how much else the machine did meanwhile.
struct Run {
    let delay: Double
    /// The JSON line `run` prints for it.
    let line: String
    /// The pairs' RTT p99 (µs) by window: `warmup` (before the storm), `storm` (from its start
    /// until every room is back) and `after_start` (from its start to the end of the run).
    let p99: [String: Double]
    /// Seconds until every room was back (nil if some never came back).
    let stormSeconds: Double?
    let errors: Int
    /// What else the machine ran during the load run, in % of one CPU.
    let foreign: Double?

    static let windows = ["warmup", "storm", "after_start"]

    static func measure(delay: Double, port: Int, rooms: Int, pairs: Int, seconds: Double, db: String,
                        relayCPUs: String, loadCPUs: String, launcher: Launcher, foreignBefore: Double?) -> Run {
        func failed(_ why: String) -> Run {
            RunCommand.note("relaybench: delay \(delay) ms: \(why)")
            return Run(delay: delay, line: #"{"store_delay_ms":\#(delay),"failed":"\#(LoadCommand.escape(why))"}"#, p99: [:], stormSeconds: nil, errors: 1,
                       foreign: nil)
        }
        let serve: (process: Process, stdout: FileHandle)
        do {
            serve = try launcher.start(["serve", "--port", "\(port)", "--store-delay-ms", "\(delay)", "--db", db, "--rooms", "\(rooms)"],
                                       cpus: relayCPUs, log: "serve-\(port).log")
        } catch { return failed("cannot start serve: \(error)") }
        let banner = Launcher.firstLine(serve.stdout)
        guard banner.hasPrefix("relaybench: serving") else {
            serve.process.terminate()
            return failed("serve did not start (see serve-\(port).log)")
        }
        let relayPID = serve.process.processIdentifier
        let machineBefore = ProcessStats.machineBusy(), relayBefore = ProcessStats.cpu(of: relayPID), wallBefore = ProcessStats.now()

        let loadOutput: String
        do {
            let load = try launcher.start(["load", "--port", "\(port)", "--rooms", "\(rooms)", "--pairs", "\(pairs)", "--seconds", "\(seconds)",
                                           "--relay-pid", "\(relayPID)", "--label", "store-delay-ms=\(delay)"],
                                          cpus: loadCPUs, log: "load-\(port).log")
            loadOutput = String(decoding: load.stdout.readDataToEndOfFile(), as: UTF8.self)
            load.process.waitUntilExit()
        } catch {
            serve.process.terminate()
            return failed("cannot start load: \(error)")
        }
        let machineAfter = ProcessStats.machineBusy(), relayAfter = ProcessStats.cpu(of: relayPID), wall = ProcessStats.now() - wallBefore

        serve.process.terminate()
        let serveOutput = String(decoding: serve.stdout.readDataToEndOfFile(), as: UTF8.self)
        serve.process.waitUntilExit()

        let loadLine = loadOutput.split(separator: "\n").last.map(String.init) ?? ""
        let serveLine = serveOutput.split(separator: "\n").last.map(String.init) ?? "null"
        guard let load = (try? JSONSerialization.jsonObject(with: Data(loadLine.utf8))) as? [String: Any] else {
            return failed("load printed no result (see load-\(port).log)")
        }
        // What ran beside the two processes during the load run, in % of one CPU.
        var foreign: Double?
        if let machineBefore, let machineAfter, let relayBefore, let relayAfter, let loadCPU = load["load_cpu_s"] as? Double, wall > 0 {
            foreign = (Double(machineAfter - machineBefore) - Double(relayAfter - relayBefore) - loadCPU * 1e9) / Double(wall) * 100
        }
        func text(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "null" }
        let line = #"{"store_delay_ms":\#(delay),"foreign_cpu_pct_before":\#(text(foreignBefore)),"foreign_cpu_pct":\#(text(foreign)),"load":\#(loadLine),"serve":\#(serveLine)}"#
        var p99: [String: Double] = [:]
        for window in windows {
            p99[window] = ((load["rtt_\(window)_us"] as? [String: Any])?["p99"] as? NSNumber)?.doubleValue
        }
        return Run(delay: delay, line: line, p99: p99, stormSeconds: (load["storm_seconds"] as? NSNumber)?.doubleValue,
                   errors: (load["errors"] as? Int) ?? 1, foreign: foreign)
    }
}
