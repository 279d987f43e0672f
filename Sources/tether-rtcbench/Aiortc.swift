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

    func setup(runs: Int, turn: Coturn? = nil) throws(BenchFailure) -> [Double] {
        let relay = turn.map { ["--turn", $0.url, "--username", $0.username, "--password", $0.password] } ?? []
        let times = try run(["setup", "--runs", "\(runs)"] + relay).compactMap { $0["ms"] as? Double }
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

/// Tests/Peers/coturn_fixture.py serving a real coturn on loopback with a fresh REST secret, and
/// one §8.2 credential for it (the fixture computes it, so the benchmark shares no code with the
/// server side it exercises).
final class Coturn {
    let url: String
    let username: String
    let password: String
    private let process: Process

    init(python: String, script: String) throws(BenchFailure) {
        let secret = (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, "serve", "--secret", secret]
        let output = Pipe()
        process.standardOutput = output
        do { try process.run() } catch { throw BenchFailure("cannot start \(script): \(error)") }
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let port = text.split(separator: "\n").first.flatMap({ $0.hasPrefix("listening on ") ? Int($0.dropFirst(13)) : nil }) else {
            process.terminate()
            throw BenchFailure("coturn did not start: \(text)")
        }
        url = "turn:127.0.0.1:\(port)?transport=udp"
        let credentials = Process()
        credentials.executableURL = URL(fileURLWithPath: python)
        credentials.arguments = [script, "credentials", "--secret", secret]
        let printed = Pipe()
        credentials.standardOutput = printed
        do { try credentials.run() } catch { throw BenchFailure("cannot run \(script) credentials: \(error)") }
        let lines = String(decoding: printed.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        credentials.waitUntilExit()
        guard lines.count >= 2 else {
            process.terminate()
            throw BenchFailure("\(script) credentials printed \(lines.count) lines")
        }
        username = String(lines[0])
        password = String(lines[1])
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
