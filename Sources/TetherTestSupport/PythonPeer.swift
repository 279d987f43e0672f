public import Foundation
import TetherSync

/// An independent peer written in Python (from `Tests/Peers/`), run with the project's
/// virtualenv interpreter and spoken to over its stdin/stdout in records: a 4-byte big-endian
/// length, a 1-byte kind and the body.
public final class PythonPeer {
    public enum Failure: Error, CustomStringConvertible {
        case interpreterMissing(String)
        case closed(String)
        public var description: String {
            switch self {
            case let .interpreterMissing(path): "no Python interpreter at \(path) (run scripts/install-deps)"
            case let .closed(stderr): "peer closed its output; stderr: \(stderr)"
            }
        }
    }

    private let launched: PythonProcess
    private var input: Pipe { launched.input }
    private var output: Pipe { launched.output }
    private var errors: Pipe { launched.errors }
    private var process: Process { launched.process }

    /// Starts `Tests/Peers/<script>` with `arguments`; the peer is killed after `timeout` seconds.
    public init(script: String, arguments: [String], timeout: TimeInterval = 30) throws {
        launched = try PythonProcess(script: script, arguments: arguments, timeout: timeout)
    }

    public func send(kind: UInt8, _ body: [UInt8]) throws {
        let length = UInt32(body.count + 1)
        let header: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), kind]
        try input.fileHandleForWriting.write(contentsOf: Data(header + body))
    }

    /// The next record, or a thrown `closed` if the peer ended.
    public func receive() throws -> (kind: UInt8, body: [UInt8]) {
        let header = try readExactly(5)
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        return (header[4], try readExactly(length - 1))
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < count {
            let chunk = output.fileHandleForReading.readData(ofLength: count - bytes.count)
            if chunk.isEmpty { throw Failure.closed(stderrText()) }
            bytes += chunk
        }
        return bytes
    }

    /// Closes the peer's stdin and waits for it to exit; returns its exit status.
    public func finish() -> Int32 {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus
    }

    public func stderrText() -> String {
        if process.isRunning { return "" }
        return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

extension PythonPeer {
    /// Runs `Tests/Peers/<script>` to completion and returns its exit status and output.
    public static func run(script: String, arguments: [String], timeout: TimeInterval = 30) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess(PythonPackageVectors.virtualenv.appendingPathComponent("bin/python").path,
                       [Vectors.packageRoot().appendingPathComponent("Tests/Peers/\(script)").path] + arguments, timeout: timeout)
    }
}

/// Runs a program to completion (killed after `timeout` seconds).
public func runProcess(_ path: String, _ arguments: [String], timeout: TimeInterval = 30) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.runWithSignalsUnblocked()
    let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
    // Read both pipes concurrently so a chatty child cannot block on a full pipe.
    let errorData = Locked(Data())
    let group = DispatchGroup()
    DispatchQueue.global().async(group: group) {
        let read = err.fileHandleForReading.readDataToEndOfFile()
        errorData.withLock { $0 = read }
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    watchdog.cancel()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errorData.withLock { $0 }, as: UTF8.self))
}
