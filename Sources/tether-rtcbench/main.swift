import TetherSync
import Foundation
import TetherCall
import TetherRTC
import TetherWire

// tether-rtcbench: RTCMediaTransport beside aiortc on loopback, in one run — call setup time,
// raw data-channel throughput, and throughput through the Noise secure channel (which §9.6
// paces to 40 frames a second). One JSON line per measurement, then a summary.

let usage = """
usage: tether-rtcbench [--runs N] [--bytes B] [--throughput-runs N] [--aiortc-bytes B] [--size S] [--window W] [--texts T]
                       [--burst-runs R] [--burst-texts T]
                       [--python PATH] [--script PATH] [--no-aiortc] [--no-relay]
  --runs          setups per stack (20)
  --bytes         bytes one way for Tether's raw throughput (64 MiB)
  --throughput-runs  raw throughput runs, each on a new call; the median is reported (5)
  --aiortc-bytes  the same for aiortc (default --bytes; aiortc is slow, a smaller run saves time)
  --size          message size (16384)
  --window        messages the sender keeps unreceived (16; at most 64, the transport's 1 MiB queue)
  --texts         largest texts through the secure channel, 39 a second (120: about three seconds)
  --burst-runs    runs handing every text to the channel's pacer at once (5)
  --burst-texts   texts in each of those (100)
  --python        the virtualenv's python with aiortc (.venv/bin/python)
  --script        Tests/Peers/rtc_bench_peer.py
  --no-relay      skip the setups relayed through coturn (Tests/Peers/coturn_fixture.py, turnserver)
"""

struct Options {
    var runs = 20
    var bytes = 64 << 20
    /// One 64 MiB run lasts about a second, and SCTP's congestion window opening weighs on
    /// each differently (41-65 MB/s seen in consecutive runs): one sample says little.
    var throughputRuns = 5
    var aiortcBytes: Int?
    var size = 16 << 10
    var window = 16
    var texts = 120
    var burstRuns = 5
    var burstTexts = 100
    var python = ".venv/bin/python"
    var script = "Tests/Peers/rtc_bench_peer.py"
    var aiortc = true
    var relay = true
    var coturnScript = "Tests/Peers/coturn_fixture.py"

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments
        func number(minimum: Int = 1) -> Int {
            guard let text = rest.popFirst(), let value = Int(text), value >= minimum else { fail(usage) }
            return value
        }
        func text() -> String {
            guard let text = rest.popFirst() else { fail(usage) }
            return text
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--runs": runs = number()
            case "--bytes": bytes = number()
            case "--throughput-runs": throughputRuns = number()
            case "--aiortc-bytes": aiortcBytes = number()
            case "--size": size = number()
            case "--window": window = number()
            case "--texts": texts = number()
            case "--burst-runs": burstRuns = number(minimum: 0)
            case "--burst-texts": burstTexts = number()
            case "--python": python = text()
            case "--script": script = text()
            case "--no-aiortc": aiortc = false
            case "--no-relay": relay = false
            case "-h", "--help": print(usage); exit(0)
            default: fail(usage)
            }
        }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

func emit(_ record: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: record, options: [.sortedKeys]) else { return }
    print(String(decoding: data, as: UTF8.self))
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    // Nearest rank: with 20 runs p90 is the 18th, a run that happened, not an interpolation.
    let rank = max(1, Int((fraction * Double(sorted.count)).rounded(.up)))
    return sorted[min(rank, sorted.count) - 1]
}

struct Row {
    var name: String
    var target: String
    var measured: String
    var ratio: String
    var met: Bool?
}

func rounded(_ value: Double, _ places: Int = 1) -> Double {
    let scale = pow(10, Double(places))
    return (value * scale).rounded() / scale
}

let options = Options(CommandLine.arguments.dropFirst())
let direct = RTCMediaTransport.Options(localAddresses: ["127.0.0.1"])
let aiortc = Aiortc(python: options.python, script: options.script)
var rows: [Row] = []

do throws(BenchFailure) {
    // 1. Setup.
    let setup = try measureSetup(runs: options.runs, options: direct)
    for (run, ms) in setup.enumerated() { emit(["stack": "tether", "measure": "setup", "run": run, "ms": rounded(ms, 2)]) }
    let median = percentile(setup, 0.5), p90 = percentile(setup, 0.9)
    emit(["stack": "tether", "measure": "setup-summary", "runs": setup.count, "medianMs": rounded(median, 2), "p90Ms": rounded(p90, 2)])
    rows.append(Row(name: "setup, Tether direct (median / p90)", target: "<= 1000 ms",
                    measured: "\(rounded(median)) / \(rounded(p90)) ms", ratio: "\(rounded(median / 1000, 3))x of target", met: median <= 1000))
    if options.aiortc {
        let theirs = try aiortc.setup(runs: options.runs)
        for (run, ms) in theirs.enumerated() { emit(["stack": "aiortc", "measure": "setup", "run": run, "ms": rounded(ms, 2)]) }
        let theirMedian = percentile(theirs, 0.5), theirP90 = percentile(theirs, 0.9)
        emit(["stack": "aiortc", "measure": "setup-summary", "runs": theirs.count, "medianMs": rounded(theirMedian, 2), "p90Ms": rounded(theirP90, 2)])
        rows.append(Row(name: "setup, aiortc direct (median / p90)", target: "(reference)",
                        measured: "\(rounded(theirMedian)) / \(rounded(theirP90)) ms",
                        ratio: "Tether \(rounded(median / theirMedian, 2))x aiortc's time", met: nil))
    }

    // 1b. Setup relayed through a real coturn on loopback: relay candidates only on both stacks,
    // so the TURN allocations and permissions are part of every call's setup.
    if options.relay {
        let coturn = try Coturn(python: options.python, script: options.coturnScript)
        defer { coturn.stop() }
        let server = ICEServer(urls: [coturn.url], username: coturn.username, credential: coturn.password)
        let relayed = try measureSetup(runs: options.runs, iceServers: [server],
                                       options: RTCMediaTransport.Options(relayOnly: true, localAddresses: ["127.0.0.1"]))
        for (run, ms) in relayed.enumerated() { emit(["stack": "tether", "measure": "setup", "relayed": true, "run": run, "ms": rounded(ms, 2)]) }
        let median = percentile(relayed, 0.5), p90 = percentile(relayed, 0.9)
        emit(["stack": "tether", "measure": "setup-summary", "relayed": true, "runs": relayed.count, "medianMs": rounded(median, 2), "p90Ms": rounded(p90, 2)])
        var reference: Row?
        var ratio = "-"
        if options.aiortc {
            let theirs = try aiortc.setup(runs: options.runs, turn: coturn)
            for (run, ms) in theirs.enumerated() { emit(["stack": "aiortc", "measure": "setup", "relayed": true, "run": run, "ms": rounded(ms, 2)]) }
            let theirMedian = percentile(theirs, 0.5), theirP90 = percentile(theirs, 0.9)
            emit(["stack": "aiortc", "measure": "setup-summary", "relayed": true, "runs": theirs.count, "medianMs": rounded(theirMedian, 2), "p90Ms": rounded(theirP90, 2)])
            reference = Row(name: "setup, aiortc relayed via coturn (median / p90)", target: "(reference)",
                            measured: "\(rounded(theirMedian)) / \(rounded(theirP90)) ms", ratio: "-", met: nil)
            ratio = "Tether \(rounded(median / theirMedian, 2))x aiortc's time"
        }
        rows.append(Row(name: "setup, Tether relayed via coturn (median / p90)", target: "(no target)",
                        measured: "\(rounded(median)) / \(rounded(p90)) ms", ratio: ratio, met: nil))
        if let reference { rows.append(reference) }
    }

    // 2. Raw data-channel throughput.
    var rates: [Double] = []
    for run in 0..<options.throughputRuns {
        let raw = try measureRawThroughput(total: options.bytes, size: options.size, window: options.window, options: direct)
        emit(["stack": "tether", "measure": "throughput", "run": run, "bytes": raw.bytes, "messageBytes": options.size, "window": options.window,
              "seconds": rounded(raw.seconds, 4), "cpuSeconds": rounded(raw.cpuSeconds ?? 0, 4), "mbps": rounded(raw.megabytesPerSecond, 2)])
        rates.append(raw.megabytesPerSecond)
    }
    // Nearest rank: the true median for an odd number of runs (5 by default), the lower middle one otherwise.
    let rawMedian = percentile(rates, 0.5)
    emit(["stack": "tether", "measure": "throughput-summary", "runs": rates.count, "medianMbps": rounded(rawMedian, 2),
          "minMbps": rounded(rates.min() ?? 0, 2), "maxMbps": rounded(rates.max() ?? 0, 2)])
    rows.append(Row(name: "raw data channel, Tether (\(options.size) B messages, median of \(rates.count))", target: ">= 50 MB/s",
                    measured: "\(rounded(rawMedian, 2)) MB/s (\(rounded(rates.min() ?? 0, 1))-\(rounded(rates.max() ?? 0, 1)))",
                    ratio: "\(rounded(rawMedian / 50, 2))x of target", met: rawMedian >= 50))
    if options.aiortc {
        let theirs = try aiortc.throughput(total: options.aiortcBytes ?? options.bytes, size: options.size)
        emit(["stack": "aiortc", "measure": "throughput", "bytes": theirs.bytes, "messageBytes": options.size,
              "seconds": rounded(theirs.seconds, 4), "mbps": rounded(theirs.megabytesPerSecond, 2)])
        let ratio = rawMedian / theirs.megabytesPerSecond
        rows.append(Row(name: "raw data channel, Tether vs aiortc", target: ">= 3x aiortc",
                        measured: "\(rounded(rawMedian, 2)) vs \(rounded(theirs.megabytesPerSecond, 2)) MB/s",
                        ratio: "\(rounded(ratio, 1))x", met: ratio >= 3))
    }

    // 3. Through the secure channel, over the data channel. The benchmark spaces the texts at 39
    // a second itself: left to the channel's pacer, a burst is released at exactly the edge of
    // the sender's window, and the receiver's fixed window (anchored at the first frame's
    // arrival) counts 41 whenever a later frame had less latency than the first (step 3b).
    let interval = CallChannelLimits.rateWindow / (CallChannelLimits.framesPerWindow - 1)
    let spaced = try measureSecureThroughput(texts: options.texts, sending: .spaced(interval: interval), options: direct)
    if let failure = spaced.failure { throw BenchFailure("the spaced secure-channel run ended: \(failure)") }
    let secure = spaced.result
    let cap = Double(CallChannelLimits.framesPerWindow) * Double(secure.textBytes) / Double(max(secure.texts, 1)) / 1e6
    emit(["stack": "tether", "measure": "secure-throughput", "sending": "spaced", "framesPerSecond": CallChannelLimits.framesPerWindow - 1,
          "texts": secure.texts, "textBytes": secure.textBytes, "frameBytes": secure.frameBytes, "seconds": rounded(secure.seconds, 4),
          "mbps": rounded(secure.megabytesPerSecond, 3), "section96CapMbps": rounded(cap, 3)])
    rows.append(Row(name: "secure channel over the data channel (paced, §9.6)", target: ">= 50 MB/s",
                    measured: "\(rounded(secure.megabytesPerSecond, 3)) MB/s (§9.6 cap \(rounded(cap, 3)))",
                    ratio: "\(rounded(secure.megabytesPerSecond / 50, 4))x of target", met: secure.megabytesPerSecond >= 50))

    // 3b. The same texts all at once, left to the channel's own pacer: how often the receiver
    // ends the session although the sender kept §9.6's sending rule.
    var closed = 0
    for run in 0..<options.burstRuns {
        let burst = try measureSecureThroughput(texts: options.burstTexts, sending: .burst, options: direct)
        if burst.failure != nil { closed += 1 }
        emit(["stack": "tether", "measure": "secure-burst", "run": run, "texts": options.burstTexts, "delivered": burst.result.texts,
              "closedBy": burst.failure ?? NSNull()])
    }
    if options.burstRuns > 0 {
        rows.append(Row(name: "secure channel, burst left to the pacer", target: "no session closed",
                        measured: "\(closed) of \(options.burstRuns) runs closed", ratio: "-", met: closed == 0))
    }

    // 4. What the secure channel's own work would allow without §9.6.
    let cpu = try measureSecureCPU(texts: max(options.texts, 2_000))
    emit(["stack": "tether", "measure": "secure-cpu", "texts": cpu.texts, "textBytes": cpu.textBytes, "frameBytes": cpu.frameBytes,
          "seconds": rounded(cpu.seconds, 4), "mbps": rounded(cpu.megabytesPerSecond, 2)])
    rows.append(Row(name: "secure channel work alone, in memory, unpaced", target: "(ceiling; 50 MB/s)",
                    measured: "\(rounded(cpu.megabytesPerSecond, 1)) MB/s", ratio: "\(rounded(cpu.megabytesPerSecond / 50, 2))x of 50 MB/s",
                    met: nil))
} catch {
    fail("tether-rtcbench: \(error)")
}

print("")
print("Tether RTC on loopback (\(ProcessInfo.processInfo.activeProcessorCount) cores)")
let widths = [rows.map(\.name.count).max() ?? 0, 20, rows.map(\.measured.count).max() ?? 0, rows.map(\.ratio.count).max() ?? 0]
func line(_ cells: [String]) -> String {
    zip(cells, widths + [0]).map { cell, width in cell.padding(toLength: max(width, cell.count), withPad: " ", startingAt: 0) }
        .joined(separator: "  ")
}
print(line(["measurement", "target", "measured", "ratio", "met"]))
for row in rows { print(line([row.name, row.target, row.measured, row.ratio, row.met.map { $0 ? "yes" : "NO" } ?? "-"])) }
print("""

The secure channel's figure is bounded by the protocol, not the code: signaling.md §9.6 closes a
session on the 41st incoming frame in a second, so senders pace to 40 frames a second, and one
frame carries at most one text (4,000 scalars, 16,000 UTF-8 bytes), so no implementation can
carry more than 40 x 16,000 B = 0.64 MB/s of text (40 x 32 KiB = 1.3 MB/s of raw frame payload).
The unpaced in-memory row is what the channel's cryptography and encoding would allow.
""")
