import Foundation

/// Tests/Peers/rtc_bench_peer.py: the same measurements with two aiortc peer connections, run as
/// a child so both stacks are timed on this machine in this run.
struct Aiortc {
    let python: String
    let script: String

    /// Runs one command and returns its JSON lines; stderr passes through.
    func run(_ arguments: [String]) throws(BenchFailure) -> [[String: Any]] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script] + arguments
        let output = Pipe()
        process.standardOutput = output
        do { try process.run() } catch { throw BenchFailure("cannot start \(python) \(script): \(error)") }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchFailure("\(script) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func setup(runs: Int) throws(BenchFailure) -> [Double] {
        let times = try run(["setup", "--runs", "\(runs)"]).compactMap { $0["ms"] as? Double }
        guard times.count == runs else { throw BenchFailure("aiortc reported \(times.count) of \(runs) setups") }
        return times
    }

    func throughput(total: Int, size: Int) throws(BenchFailure) -> Throughput {
        guard let record = try run(["throughput", "--bytes", "\(total)", "--size", "\(size)"]).first,
              let bytes = record["bytes"] as? Int, let seconds = record["seconds"] as? Double else {
            throw BenchFailure("aiortc reported no throughput")
        }
        return Throughput(bytes: bytes, seconds: seconds)
    }
}
